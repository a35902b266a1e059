//! The simulator's deterministic "model".
//!
//! It answers three kinds of prompt: routing a customer message into one of the listed
//! categories (the example bench), simple arithmetic, and `Echo: text`. Its error rate depends
//! on the prompt's wording, so prompt variants really differ; which cases it gets wrong depends
//! mostly on the case, so variants' errors overlap the way real models' do.
//!
//! The case's own text is taken from `<message>…</message>` when the prompt has it (the
//! example prompts do), otherwise from the last user message.

use std::sync::LazyLock;

use regex::Regex;

use promptgauge_client::ChatMessage;

/// What the model produces for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Generation {
    pub reasoning: String,
    pub text: String,
}

/// Categories of the example bench, with the words that give each away.
const CATEGORIES: [(&str, &[&str]); 4] = [
    (
        "billing",
        &[
            "refund",
            "charge",
            "charged",
            "invoice",
            "bill",
            "billed",
            "payment",
            "price",
            "subscription",
            "card",
            "receipt",
            "discount",
            "coupon",
            "overcharged",
            "fee",
        ],
    ),
    (
        "technical",
        &[
            "crash",
            "crashes",
            "error",
            "bug",
            "app",
            "install",
            "update",
            "loading",
            "freezes",
            "slow",
            "sync",
            "screen",
            "button",
            "broken",
            "api",
            "notification",
        ],
    ),
    (
        "shipping",
        &[
            "package",
            "parcel",
            "delivery",
            "delivered",
            "shipping",
            "shipped",
            "tracking",
            "courier",
            "arrive",
            "arrived",
            "address",
            "order",
            "box",
            "damaged",
            "lost",
        ],
    ),
    (
        "account",
        &[
            "password",
            "login",
            "log",
            "account",
            "email",
            "username",
            "profile",
            "verify",
            "verification",
            "locked",
            "delete",
            "two-factor",
            "2fa",
            "sign",
        ],
    ),
];

/// The chance of a wrong answer for a prompt's wording.
pub(crate) fn error_rate(prompt: &str) -> f64 {
    let p = prompt.to_lowercase();
    // A prompt that says what it should score (for trying `--best` and the statistics on
    // arms of known accuracy).
    if let Some(accuracy) = SIMULATED_ACCURACY
        .captures(&p)
        .and_then(|c| c[1].parse::<f64>().ok())
        .filter(|a| (0.0..=100.0).contains(a))
    {
        return 1.0 - accuracy / 100.0;
    }
    if p.contains("step by step") || p.contains("step-by-step") {
        0.08
    } else if p.contains("deep breath") {
        0.17
    } else if INCENTIVE.is_match(&p) {
        0.20
    } else {
        0.22
    }
}

fn hash(parts: &[&str]) -> u64 {
    promptgauge_base::hash::hash_parts(parts)
}

pub(crate) fn unit(parts: &[&str]) -> f64 {
    (hash(parts) >> 11) as f64 / (1u64 << 53) as f64
}

static INCENTIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\$\d|\b(tip|tipped|fired|or else|penalty|punished)\b").expect("valid regex")
});
static SIMULATED_ACCURACY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"simulated accuracy (\d{1,3}(?:\.\d+)?)%").expect("valid regex"));
static MESSAGE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<message>(.*?)</message>").expect("valid regex"));
static OPTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*\(?([A-Z])[).:]\s*([A-Za-z]+)").expect("valid regex"));
static ARITHMETIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(-?\d+(?:\.\d+)?)\s*([-+*×/])\s*(-?\d+(?:\.\d+)?)").expect("valid regex")
});
static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[a-z0-9-]+").expect("valid regex"));

/// How much worse a model of this name is: names with `small`, `tiny` or `mini` err more,
/// so comparing two models on the simulator shows a difference.
pub(crate) fn model_penalty(model: &str) -> f64 {
    let m = model.to_lowercase();
    if ["small", "tiny", "mini"].iter().any(|w| m.contains(w)) {
        0.15
    } else {
        0.0
    }
}

/// What the model says to a task it does not know.
pub(crate) const UNKNOWN: &str = "I don't know.";

/// Whether the model gets this case wrong with this prompt: mostly the case's difficulty,
/// partly this prompt's luck, against a wording- and model-dependent error rate.
pub(crate) fn wrong(prompt: &str, case: &str, model: &str, seed: &str) -> bool {
    // A prompt that says its accuracy gets it: the case's own difficulty (shared by every
    // prompt: arms are right and wrong on the same cases) 70% of the time, a draw of its
    // own otherwise — a mixture of uniform draws, so uniform, and right about N% of cases.
    if SIMULATED_ACCURACY.is_match(&prompt.to_lowercase()) {
        let shared = unit(&[case, prompt, seed, "shared"]) < 0.7;
        let difficulty = if shared {
            unit(&[case])
        } else {
            unit(&[case, prompt, seed])
        };
        return difficulty < error_rate(prompt) + model_penalty(model);
    }
    let difficulty = 0.7 * unit(&[case]) + 0.3 * unit(&[case, prompt, seed]);
    difficulty < error_rate(prompt) + model_penalty(model)
}

/// Answers a conversation as `model`. `seed` varies the sample (for repeats).
pub(crate) fn generate(messages: &[ChatMessage], model: &str, seed: &str) -> Generation {
    let prompt: String = messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let user = messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .map_or("", |m| m.content.as_str());
    let case_text = MESSAGE
        .captures(user)
        .and_then(|c| c.get(1))
        .map_or(user, |m| m.as_str())
        .trim();
    let careful = {
        let p = prompt.to_lowercase();
        p.contains("step by step") || p.contains("step-by-step")
    };
    let wrong = wrong(&prompt, case_text, model, seed);

    if let Some(rest) = user.trim().strip_prefix("Echo:") {
        return Generation {
            reasoning: String::new(),
            text: rest.trim().to_string(),
        };
    }
    if let Some(g) = route(&prompt, case_text, wrong, careful) {
        return g;
    }
    if let Some(c) = ARITHMETIC.captures(case_text) {
        let a: f64 = c[1].parse().unwrap_or(0.0);
        let b: f64 = c[3].parse().unwrap_or(0.0);
        let mut value = match &c[2] {
            "+" => a + b,
            "-" => a - b,
            "*" | "×" => a * b,
            _ if b != 0.0 => a / b,
            _ => f64::NAN,
        };
        if wrong {
            value += 1.0;
        }
        let shown = if value.fract() == 0.0 {
            format!("{}", value as i64)
        } else {
            format!("{value:.2}")
        };
        let text = if careful {
            format!(
                "First, {} {} {} → {shown}.\nAnswer: {shown}",
                &c[1], &c[2], &c[3]
            )
        } else {
            shown
        };
        return Generation {
            reasoning: format!("Compute {} {} {}.", &c[1], &c[2], &c[3]),
            text,
        };
    }
    Generation {
        reasoning: String::new(),
        text: UNKNOWN.into(),
    }
}

/// Routes a customer message when the prompt lists lettered options naming the categories.
fn route(prompt: &str, case_text: &str, wrong: bool, careful: bool) -> Option<Generation> {
    let options: Vec<(String, String)> = OPTION
        .captures_iter(prompt)
        .map(|c| (c[1].to_string(), c[2].to_lowercase()))
        .filter(|(_, name)| CATEGORIES.iter().any(|(cat, _)| cat == name))
        .collect();
    if options.len() < 2 {
        return None;
    }
    let lower = case_text.to_lowercase();
    let words: Vec<&str> = WORD.find_iter(&lower).map(|m| m.as_str()).collect();
    let scores: Vec<(usize, Option<&str>)> = CATEGORIES
        .iter()
        .map(|(_, keys)| {
            let hits: Vec<&str> = words.iter().copied().filter(|w| keys.contains(w)).collect();
            (hits.len(), hits.first().copied())
        })
        .collect();
    let best = (0..CATEGORIES.len()).max_by_key(|&i| (scores[i].0, usize::MAX - i))?;
    let mut pick = if scores[best].0 == 0 {
        (hash(&[case_text]) % CATEGORIES.len() as u64) as usize
    } else {
        best
    };
    if wrong {
        pick = (pick + 1 + (hash(&[case_text, "wrong"]) % 3) as usize) % CATEGORIES.len();
    }
    let category = CATEGORIES[pick].0;
    let letter = options
        .iter()
        .find(|(_, name)| name == category)
        .map_or_else(|| options[0].0.clone(), |(l, _)| l.clone());
    let clue = scores[best].1.unwrap_or("nothing specific");
    let text = if careful {
        format!(
            "The customer mentions “{clue}”. → This is a {category} question.\nAnswer: {letter}"
        )
    } else {
        letter
    };
    Some(Generation {
        reasoning: format!("The message mentions {clue}; that suggests {category}."),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(system: &str, user: &str) -> Generation {
        generate(
            &[
                ChatMessage::new("system", system),
                ChatMessage::new("user", user),
            ],
            "mock-model",
            "",
        )
    }

    const OPTIONS: &str = "Route the message.\nA) Billing\nB) Technical\nC) Shipping\nD) Account\nReply with the letter only.";

    #[test]
    fn routes_by_keywords_to_the_listed_letter() {
        let mut right = 0;
        let msgs = [
            ("I was charged twice, please refund me", "A"),
            ("The app crashes when I open it", "B"),
            ("My package never arrived", "C"),
            ("I forgot my password and cannot login", "D"),
        ];
        for (m, want) in msgs {
            let g = ask(OPTIONS, &format!("<message>{m}</message>"));
            right += usize::from(g.text == want);
        }
        assert!(right >= 3, "the model should mostly be right");
    }

    #[test]
    fn deterministic_and_wording_dependent() {
        let a = ask(OPTIONS, "<message>refund my invoice</message>");
        assert_eq!(a, ask(OPTIONS, "<message>refund my invoice</message>"));
        let careful = ask(
            &format!("{OPTIONS}\nThink step by step."),
            "<message>refund my invoice</message>",
        );
        assert!(careful.text.contains("Answer: "));
        assert!(error_rate("think step by step") < error_rate("plain"));
    }

    #[test]
    fn arithmetic_and_echo() {
        let g = ask("You are a calculator.", "What is 12 + 30?");
        assert!(g.text == "42" || g.text == "43");
        assert_eq!(ask("", "Echo: héllo").text, "héllo");
    }
}
