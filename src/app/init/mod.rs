//! `init [DIR] --task choice|number|json|free|vision|agent`: a small bench that runs at once on
//! the built-in simulator, every key commented, to edit into your own.

use std::path::Path;

use super::{Exit, Failure};
use crate::cli::{InitArgs, Task};
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_suite::schema::SchemaOf;

mod agent;
mod shapes;
mod starter;

use starter::{Starter, StarterFile};

fn bench_yaml(name: &str, grade: &str, extra: &str, more_variants: &str) -> String {
    format!(
        r#"# A promptgauge bench: every prompt variant runs over every case, and the variants are
# compared case by case. Edit the cases and prompts; `promptgauge check` validates
# everything without sending a request, `promptgauge run` measures.
name: {name}                       # used in report folder names
cases: cases.jsonl                 # one JSON object per line: id, vars, expected (a path, or a list)
variants:                          # prompt files; the first is the baseline the others are compared with
  - prompts/plain.yaml
  - prompts/careful.yaml
{more_variants}grade: {grade}
{extra}endpoint:
  # base_url: http://127.0.0.1:8000/v1   # your server (vLLM, llama.cpp, …) or https://api.openai.com/v1;
  #                                      # unset: the built-in simulator answers (and says so)
  # model: my-model
  api_key_env: OPENAI_API_KEY      # the NAME of the variable holding the key, never the key
params: {{ temperature: 0, max_tokens: 400 }}   # sent with every request
limits:
  concurrency: 4                   # requests in flight at once; stay below your server's capacity
  max_attempts: 4                  # retries on 429/5xx/broken streams, with full-jitter backoff
  first_token_timeout: 60s         # request sent → first event
  idle_timeout: 30s                # longest silence between events
  total_timeout: 300s              # one whole attempt
# price: {{ input_per_mtok: 0.15, output_per_mtok: 0.60 }}   # USD per million tokens: enables cost
repeats: 1                         # answers per case and variant (more only with temperature > 0)
confidence: 0.95                   # for every interval and verdict
"#
    )
}

fn prompt(name: &str, system: &str, user: &str) -> String {
    format!(
        "# A variant: chat messages whose contents are Jinja templates over the case's vars.\nname: {name}\nmessages:\n  - role: system\n    content: {}\n  - role: user\n    content: {}\n# params: {{ max_tokens: 200 }}   # overrides the bench's params for this variant\n",
        serde_json::to_string(system).unwrap_or_default(),
        serde_json::to_string(user).unwrap_or_default(),
    )
}

fn files(task: Task, name: &str) -> Vec<StarterFile> {
    let s = match task {
        Task::Choice => choice(),
        Task::Number => number(),
        Task::Json => json(),
        Task::Free => free(),
        Task::Vision => shapes::vision(),
        Task::Agent => agent::agent(),
    };
    let mut files = vec![
        StarterFile::new(
            "promptgauge.yaml",
            bench_yaml(name, s.grade, s.extra, s.more_variants),
        ),
        StarterFile::new("cases.jsonl", s.cases.join("\n") + "\n"),
        StarterFile::new("prompts/plain.yaml", prompt("plain", s.plain.0, s.plain.1)),
        StarterFile::new(
            "prompts/careful.yaml",
            prompt("careful", s.careful.0, s.careful.1),
        ),
    ];
    files.extend(s.more_files);
    for f in &mut files {
        if let Some(which) = schema_of(&f.path) {
            let line = format!("# yaml-language-server: $schema={}\n", which.url());
            f.bytes.splice(0..0, line.into_bytes());
        }
    }
    files
}

/// The schema an editor checks a starter YAML file with (named on its first line, which
/// VS Code's and Neovim's YAML language server read): the bench, or a prompt variant.
fn schema_of(path: &str) -> Option<SchemaOf> {
    match path {
        "promptgauge.yaml" => Some(SchemaOf::Bench),
        p if p.starts_with("prompts/") && p.ends_with(".yaml") => Some(SchemaOf::Variant),
        _ => None,
    }
}

/// `--task choice`: route a support message to a team by its letter.
fn choice() -> Starter {
    Starter {
        grade: "{ kind: choice }               # the option letter in the answer must equal `expected`",
        extra: "",
        cases: [
            ("I was charged twice for my subscription.", "A"),
            ("The app crashes when I open settings.", "B"),
            ("My parcel has not arrived yet.", "C"),
            ("How do I change my password?", "D"),
            ("Please refund my last order.", "A"),
            ("I get an error 500 when I log in.", "B"),
            ("The courier left my package at the wrong door.", "C"),
            ("I want to delete my account.", "D"),
            ("Why was my card declined?", "A"),
            ("Tracking says delivered but nothing came.", "C"),
        ]
        .iter()
        .enumerate()
        .map(|(i, (m, e))| {
            format!(
                "{{\"id\": \"c-{:02}\", \"vars\": {{\"message\": {}}}, \"expected\": \"{e}\"}}",
                i + 1,
                serde_json::to_string(m).unwrap_or_default()
            )
        })
        .collect(),
        plain: (
            "Route the message to a team: A billing, B technical, C shipping, D account. Answer with the letter.",
            "{{ message }}",
        ),
        careful: (
            "Route the message to a team: A billing, B technical, C shipping, D account. Think step by step, then end with 'Answer: <letter>'.",
            "<message>{{ message }}</message>",
        ),
        more_variants: "",
        more_files: Vec::new(),
    }
}

/// `--task number`: sums, scored by the last number.
fn number() -> Starter {
    Starter {
        grade: "{ kind: number, tolerance: 0 }  # the last number in the answer must equal `expected`",
        extra: "",
        cases: (1..=10)
                .map(|i| format!("{{\"id\": \"n-{i:02}\", \"vars\": {{\"question\": \"What is {} + {}?\"}}, \"expected\": \"{}\"}}", 7 * i, 3 * i + 1, 10 * i + 1))
                .collect(),
        plain: ("Answer with a number only.", "{{ question }}"),
        careful: ("Work it out step by step, then give the final number on the last line.", "{{ question }}"),
        more_variants: "",
        more_files: Vec::new(),
    }
}

/// `--task json`: the fields of an order, extracted as JSON.
fn json() -> Starter {
    Starter {
        grade: "{ kind: fields, required: [order_id] }   # the share of expected fields the JSON answer gets right; a wrong order_id scores 0",
        extra: "",
        cases: [
                ("Dana Lee", "A-1042", 89.9),
                ("Omar Haddad", "B-77", 12.0),
                ("Mia Wong", "C-3", 250.0),
                ("Lena Berg", "D-19", 5.0),
                ("Ravi Patel", "E-221", 42.5),
                ("Sofia Rossi", "F-8", 19.99),
                ("Tom Becker", "G-510", 120.0),
                ("Ana Silva", "H-66", 7.5),
                ("Yuki Sato", "I-904", 61.2),
                ("Noah Kim", "J-12", 300.0),
            ]
            .iter()
            .enumerate()
            .map(|(i, (n, o, a))| format!("{{\"id\": \"x-{:02}\", \"vars\": {{\"text\": \"Hi, {n} here: order {o} was charged {a} twice.\"}}, \"expected\": {{\"name\": \"{n}\", \"order_id\": \"{o}\", \"amount\": {a}}}}}", i + 1))
            .collect(),
        plain: ("Extract name, order_id and amount from the message as a JSON object.", "{{ text }}"),
        careful: ("Reply with one JSON object only, keys name (string), order_id (string, as written), amount (number).", "<message>{{ text }}</message>"),
        more_variants: "",
        more_files: Vec::new(),
    }
}

/// `--task free`: a support answer in words, judged against the expected one.
fn free() -> Starter {
    Starter {
        grade: "{ kind: judge, rubric: \"Short and polite.\" }   # a model compares the answer with `expected`",
        extra: "# Who judges the answers. Unset, the model under test judges its own, and the reports say\n# so (a model tends to favour its own answers). Pin another model here, or for one run with\n#   --judge-base-url URL --judge-model NAME --judge-key-env VAR\n# judge:\n#   base_url: https://api.openai.com/v1   # unset: wherever the answers come from\n#   model: gpt-4.1\n#   api_key_env: OPENAI_API_KEY\n",
        cases: [
            ("How many days do I have to return an item?", "30 days"),
            ("Is shipping free?", "Free on orders over $50"),
            ("How long is the warranty?", "Two years"),
            (
                "When can I call support?",
                "Monday to Friday, 9:00 to 17:00",
            ),
            (
                "Can I change my delivery address?",
                "Yes, until the order ships",
            ),
            ("Do you ship abroad?", "To the EU and the UK"),
            (
                "How do I track my order?",
                "With the link in the shipping email",
            ),
            ("Can I pay by invoice?", "Only business customers can"),
            (
                "Where do I find my receipt?",
                "Under Orders in your account",
            ),
            ("Can I cancel an order?", "Within one hour of ordering"),
        ]
        .iter()
        .enumerate()
        .map(|(i, (q, a))| {
            format!(
                "{{\"id\": \"f-{:02}\", \"vars\": {{\"request\": {}}}, \"expected\": {}}}",
                i + 1,
                serde_json::to_string(q).unwrap_or_default(),
                serde_json::to_string(a).unwrap_or_default()
            )
        })
        .collect(),
        plain: (
            "You are a support assistant. Answer the customer's question.",
            "{{ request }}",
        ),
        careful: (
            "You are the support assistant of a shop. Answer in one short, polite sentence.",
            "{{ request }}",
        ),
        more_variants: "",
        more_files: Vec::new(),
    }
}

/// `init`: writes a working bench into DIR; refuses to overwrite anything.
pub fn init(args: &InitArgs) -> Result<Exit, Failure> {
    let dir = args.dir.clone();
    let name = dir
        .canonicalize()
        .ok()
        .or_else(|| Some(dir.clone()))
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| !n.is_empty() && n != ".")
        .unwrap_or_else(|| "my-bench".into())
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect::<String>();
    let files = files(args.task, &name);
    for f in &files {
        let path = dir.join(&f.path);
        // Anything there — a symlink too, even one pointing nowhere, which a write would
        // follow to wherever it points.
        if std::fs::symlink_metadata(&path).is_ok() {
            return Err(UsageError::with_fix(
                format!("{} already exists: init never overwrites", path.display()),
                "choose an empty folder: promptgauge init NEW_DIR",
            )
            .into());
        }
    }
    for f in &files {
        // A new file only: never through a symlink made since the check.
        promptgauge_base::files::write_new(&dir.join(&f.path), &f.bytes)
            .map_err(|e| anyhow::anyhow!(e))
            .before_send()?;
    }
    let here = if dir == Path::new(".") {
        String::new()
    } else {
        format!("cd {} && ", promptgauge_report::shell_path(&dir))
    };
    let written: Vec<&str> = files
        .iter()
        .map(|f| f.path.as_str())
        .filter(|p| !p.starts_with("images/"))
        .collect();
    let images = files.len() - written.len();
    let name = args.task.name();
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    out!(
        "wrote {article} {name} bench in {}: {}{}",
        dir.display(),
        written
            .join(", ")
            .replace("cases.jsonl", "cases.jsonl (10 cases)"),
        if images > 0 {
            format!(", images/ ({images} PNG images)")
        } else {
            String::new()
        }
    );
    out!("next:");
    out!(
        "  {here}promptgauge run        # the built-in simulator answers until you set endpoint.base_url"
    );
    out!(
        "  then open the report.html it names, edit the cases and prompts, and run against your model:"
    );
    out!("  promptgauge run --base-url http://127.0.0.1:8000/v1 --model my-model");
    Ok(Exit::Success)
}
