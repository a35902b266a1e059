//! Malformed input, one file at a time: each is exit code 2, no request reaches the
//! provider, and the message names the file, the line where there is one, and a fix.

use std::fs;
use std::path::Path;

use crate::common::*;
use promptgauge::mock::MockConfig;

struct Row {
    name: &'static str,
    /// Breaks one thing in a 60-case, 2-variant arithmetic bench.
    setup: fn(&Path),
    /// Every one of these must appear in stderr.
    expect: &'static [&'static str],
}

fn edit(path: &Path, f: impl FnOnce(String) -> String) {
    let text = fs::read_to_string(path).unwrap();
    fs::write(path, f(text)).unwrap();
}

fn replace_line(path: &Path, number: usize, line: &str) {
    edit(path, |t| {
        t.lines()
            .enumerate()
            .map(|(i, l)| {
                if i + 1 == number {
                    line.to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    });
}

fn add_to_bench(d: &Path, extra: &str) {
    edit(&d.join("bench.yaml"), |t| t + extra);
}

const ROWS: &[Row] = &[
    Row {
        name: "a tool_call case when no variant offers tools",
        setup: |d| {
            replace_line(
                &d.join("cases.jsonl"),
                4,
                r#"{"id": "t-1", "vars": {"question": "q"}, "expected": {"name": "lookup", "arguments": {}}, "grade": {"kind": "tool_call"}}"#,
            )
        },
        expect: &[
            "cases.jsonl:4",
            "case `t-1` is scored by the tool calls made",
            "offers no tools",
            "params: { tools",
        ],
    },
    Row {
        name: "a tool_call case expecting a tool no variant offers",
        setup: |d| {
            edit(&d.join("bench.yaml"), |t| {
                t.replace(
                    "params: { temperature: 0, max_tokens: 100 }",
                    "params:\n  temperature: 0\n  tools: [{ type: function, function: { name: lookup_order } }]",
                )
            });
            replace_line(
                &d.join("cases.jsonl"),
                4,
                r#"{"id": "t-1", "vars": {"question": "q"}, "expected": {"name": "lookup_ordr", "arguments": {}}, "grade": {"kind": "tool_call"}}"#,
            )
        },
        expect: &[
            "cases.jsonl:4",
            "expects a call to `lookup_ordr`",
            "it offers `lookup_order`",
        ],
    },
    Row {
        name: "a case without an expected answer",
        setup: |d| {
            replace_line(
                &d.join("cases.jsonl"),
                2,
                r#"{"id": "no-answer", "vars": {"question": "q"}}"#,
            )
        },
        expect: &[
            "cases.jsonl:2",
            "case `no-answer` has no `expected` answer",
            "only `json_schema` cases",
        ],
    },
    Row {
        name: "a judge prompt using a variable the case lacks",
        setup: |d| {
            fs::write(
                d.join("judge.j2"),
                "Question: {{ question }}\nMessage: {{ vars.mesage }}\nAnswer: {{ answer }}\n",
            )
            .unwrap();
            replace_line(
                &d.join("cases.jsonl"),
                3,
                r#"{"id": "j-1", "vars": {"question": "q"}, "expected": "4", "grade": {"kind": "judge", "prompt": "judge.j2"}}"#,
            )
        },
        expect: &[
            "cases.jsonl:3",
            "judge.j2:2 uses `vars.mesage`, which this case does not have",
            "vars.NAME",
        ],
    },
    Row {
        name: "a negative number of votes",
        setup: |d| {
            replace_line(
                &d.join("cases.jsonl"),
                3,
                r#"{"id": "j-1", "vars": {"question": "q"}, "expected": "4", "grade": {"kind": "judge", "votes": -1}}"#,
            )
        },
        expect: &["cases.jsonl:3", "expected a whole number ≥ 0"],
    },
    Row {
        name: "bad YAML indentation in the bench",
        setup: |d| add_to_bench(d, "limits:\n    concurrency: 2\n  max_attempts: 3\n"),
        expect: &["bench.yaml:9"],
    },
    Row {
        name: "a JSONL line that is not an object",
        setup: |d| replace_line(&d.join("cases.jsonl"), 3, "[1, 2, 3]"),
        expect: &["cases.jsonl:3", "expected a JSON object, found an array"],
    },
    Row {
        name: "a JSONL line that is not JSON",
        setup: |d| replace_line(&d.join("cases.jsonl"), 5, "{\"id\": \"x\", \"expected\": }"),
        expect: &["cases.jsonl:5:", "invalid JSON"],
    },
    Row {
        name: "a CSV row with too few fields",
        setup: |d| {
            fs::write(
                d.join("cases.csv"),
                "id,question,expected\na,What is 1 + 1?,2\nb,What is 2 + 2?\n",
            )
            .unwrap();
            edit(&d.join("bench.yaml"), |t| {
                t.replace("cases.jsonl", "cases.csv")
            });
        },
        expect: &["cases.csv:3", "2 fields but the header has 3"],
    },
    Row {
        name: "a CSV without an expected column",
        setup: |d| {
            fs::write(d.join("cases.csv"), "id,question\na,What is 1 + 1?\n").unwrap();
            edit(&d.join("bench.yaml"), |t| {
                t.replace("cases.jsonl", "cases.csv")
            });
        },
        expect: &["cases.csv:1", "no `expected` column"],
    },
    Row {
        name: "a case without expected",
        setup: |d| {
            replace_line(
                &d.join("cases.jsonl"),
                2,
                r#"{"id": "x", "vars": {"question": "q"}}"#,
            )
        },
        expect: &["cases.jsonl:2", "no `expected`"],
    },
    Row {
        name: "expected of the wrong type",
        setup: |d| {
            replace_line(
                &d.join("cases.jsonl"),
                4,
                r#"{"id": "x", "vars": {"question": "q"}, "expected": {"a": 1}}"#,
            )
        },
        expect: &[
            "cases.jsonl:4",
            "`expected` is a JSON object or list, but this grader compares text",
        ],
    },
    Row {
        name: "an expected value the grader can never match",
        setup: |d| {
            replace_line(
                &d.join("cases.jsonl"),
                6,
                r#"{"id": "x", "vars": {"question": "q"}, "expected": "six"}"#,
            )
        },
        expect: &["cases.jsonl:6", "is not a number"],
    },
    Row {
        name: "an unknown key in a case",
        setup: |d| {
            replace_line(
                &d.join("cases.jsonl"),
                1,
                r#"{"id": "x", "vars": {"question": "q"}, "expect": "1"}"#,
            )
        },
        expect: &[
            "cases.jsonl:1",
            "unknown key `expect`",
            "did you mean `expected`",
        ],
    },
    Row {
        name: "an unknown grader kind",
        setup: |d| {
            edit(&d.join("bench.yaml"), |t| {
                t.replace("kind: number", "kind: numbr")
            })
        },
        expect: &[
            "bench.yaml:4",
            "unknown value `numbr`",
            "did you mean `number`",
        ],
    },
    Row {
        name: "a regex that does not compile",
        setup: |d| {
            edit(&d.join("bench.yaml"), |t| {
                t.replace(
                    "{ kind: number }",
                    "{ kind: regex, pattern: \"(unclosed\" }",
                )
            })
        },
        expect: &["bench.yaml:4", "does not compile"],
    },
    Row {
        name: "a template syntax error",
        setup: |d| fs::write(d.join("plain.txt"), "Answer this: {{ question ").unwrap(),
        expect: &["plain.txt:1", "syntax error"],
    },
    Row {
        name: "a template variable missing in case 37 of 60",
        setup: |d| {
            replace_line(
                &d.join("cases.jsonl"),
                37,
                r#"{"id": "add-37", "vars": {"qestion": "What is 37 + 37?"}, "expected": "74"}"#,
            )
        },
        expect: &["cases.jsonl:37", "case `add-37` has no variable `question`"],
    },
    Row {
        name: "a prompt file with no user message",
        setup: |d| {
            fs::write(
                d.join("careful.yaml"),
                "name: careful\nmessages:\n  - { role: system, content: \"Think.\" }\n",
            )
            .unwrap()
        },
        expect: &["careful.yaml", "no user message"],
    },
    Row {
        name: "an unknown role",
        setup: |d| {
            fs::write(d.join("careful.yaml"), "name: careful\nmessages:\n  - { role: sytem, content: \"Think.\" }\n  - { role: user, content: \"{{ question }}\" }\n").unwrap()
        },
        expect: &["careful.yaml:3", "unknown role `sytem`"],
    },
    Row {
        name: "a bench name with a newline (it would split the CI step's outputs)",
        setup: |d| {
            edit(&d.join("bench.yaml"), |t| {
                t.replace("name: arithmetic", "name: \"arith\\nexit-code=0\"")
            })
        },
        expect: &[
            "bench.yaml:1",
            "bench name `arith\\nexit-code=0`",
            "control character",
        ],
    },
    Row {
        name: "two variants with one name",
        setup: |d| {
            fs::write(
                d.join("careful.yaml"),
                "name: plain\nmessages:\n  - { role: user, content: \"{{ question }}\" }\n",
            )
            .unwrap()
        },
        expect: &["careful.yaml", "variant name `plain` is also used by"],
    },
    Row {
        name: "non-UTF-8 bytes",
        setup: |d| {
            let mut bytes = fs::read(d.join("cases.jsonl")).unwrap();
            let second_line = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
            bytes.insert(second_line + 3, 0xFF);
            fs::write(d.join("cases.jsonl"), bytes).unwrap();
        },
        expect: &["cases.jsonl:2:4", "not valid UTF-8"],
    },
    Row {
        name: "an empty case file",
        setup: |d| fs::write(d.join("cases.jsonl"), "").unwrap(),
        expect: &["cases.jsonl", "no cases"],
    },
    Row {
        name: "an empty bench file",
        setup: |d| fs::write(d.join("bench.yaml"), "\n").unwrap(),
        expect: &["bench.yaml", "the bench file is empty"],
    },
    Row {
        name: "a directory instead of a case file",
        setup: |d| {
            fs::remove_file(d.join("cases.jsonl")).unwrap();
            fs::create_dir(d.join("cases.jsonl")).unwrap();
        },
        expect: &["cases.jsonl", "found a directory"],
    },
    Row {
        name: "a missing prompt file",
        setup: |d| fs::remove_file(d.join("careful.yaml")).unwrap(),
        expect: &[
            "bench.yaml:3: variant `careful.yaml`: there is no prompt file",
            "check the path",
        ],
    },
    Row {
        name: "a prompt written inline in variants: (issue 52, tryout 12)",
        setup: |d| {
            edit(&d.join("bench.yaml"), |t| {
                t.replace(
                    "variants: [plain.txt, careful.yaml]",
                    "variants:\n  - plain.txt\n  - name: inline\n    messages:\n      - { role: user, content: \"{{ question }}\" }",
                )
            })
        },
        expect: &[
            "bench.yaml:5:5: `variants:` holds a prompt written in the bench; it lists prompt files",
            "a variant is the path of a prompt file (.yaml, .txt or .md)",
            "variants: [prompts/plain.txt, prompts/careful.yaml]",
        ],
    },
    Row {
        name: "a prompt's text in variants: (issue 52, tryout 12)",
        setup: |d| {
            edit(&d.join("bench.yaml"), |t| {
                t.replace(
                    "variants: [plain.txt, careful.yaml]",
                    "variants:\n  - plain.txt\n  - \"Please answer: {{ question }}\"",
                )
            })
        },
        expect: &[
            "bench.yaml:5: variant `Please answer: {{ question }}` is a prompt's text, not the path of a prompt file",
            "prompts/plain.txt holding `Please answer: {{ question }}`",
        ],
    },
    Row {
        name: "a case file of an unknown type",
        setup: |d| {
            fs::copy(d.join("cases.jsonl"), d.join("cases.txt")).unwrap();
            edit(&d.join("bench.yaml"), |t| {
                t.replace("cases.jsonl", "cases.txt")
            });
        },
        expect: &["cases.txt", "unknown case file type `.txt`"],
    },
    Row {
        name: "duplicate case ids",
        setup: |d| {
            edit(&d.join("cases.jsonl"), |t| {
                t.replace("\"add-12\"", "\"add-11\"")
            })
        },
        expect: &[
            "cases.jsonl:12",
            "duplicate case id `add-11`",
            "cases.jsonl:11",
        ],
    },
    Row {
        name: "an unknown bench key",
        setup: |d| add_to_bench(d, "repeat: 3\n"),
        expect: &[
            "bench.yaml:7",
            "unknown key `repeat`",
            "did you mean `repeats`",
        ],
    },
    Row {
        name: "a base URL without a scheme",
        setup: |d| add_to_bench(d, "endpoint: { base_url: \"localhost:8000/v1\" }\n"),
        expect: &["bench.yaml:7", "no http:// or https:// scheme"],
    },
    Row {
        name: "negative concurrency",
        setup: |d| add_to_bench(d, "limits:\n  concurrency: -4\n"),
        expect: &["bench.yaml:8", "limits.concurrency must be between 1"],
    },
    Row {
        name: "zero max_attempts",
        setup: |d| add_to_bench(d, "limits: { max_attempts: 0 }\n"),
        expect: &["bench.yaml:7", "limits.max_attempts must be between 1"],
    },
    Row {
        name: "a duration that is not one",
        setup: |d| add_to_bench(d, "limits: { idle_timeout: soon }\n"),
        expect: &["bench.yaml:7", "not a duration"],
    },
    Row {
        name: "a key set twice",
        setup: |d| add_to_bench(d, "confidence: 0.9\nconfidence: 0.95\n"),
        expect: &[
            "bench.yaml:8",
            "`confidence` is set twice",
            "keep one `confidence:` line",
        ],
    },
    Row {
        name: "confidence out of range",
        setup: |d| add_to_bench(d, "confidence: 95\n"),
        expect: &["bench.yaml:7", "confidence must be between 0.5 and 1"],
    },
    Row {
        name: "a negative price",
        setup: |d| {
            edit(&d.join("bench.yaml"), |t| {
                t.replace("input_per_mtok: 1.0", "input_per_mtok: -1.0")
            })
        },
        expect: &["bench.yaml:6", "prices must be numbers"],
    },
    Row {
        name: "a request larger than the whole tokens_per_minute budget",
        setup: |d| add_to_bench(d, "limits: { tokens_per_minute: 50 }\n"),
        expect: &["cases.jsonl:1", "reserves about", "tokens_per_minute (50)"],
    },
    Row {
        name: "a timeout too long for any clock",
        setup: |d| add_to_bench(d, "limits: { total_timeout: 10000000000000000000s }\n"),
        expect: &["bench.yaml:7", "longer than a day"],
    },
    Row {
        name: "a timeout in seconds too long for any clock",
        setup: |d| add_to_bench(d, "limits: { first_token_timeout: 1e30 }\n"),
        expect: &["bench.yaml:7", "longer than a day"],
    },
    Row {
        name: "a loop bomb in a template",
        setup: |d| {
            fs::write(
                d.join("plain.txt"),
                "{% for a in 'x'*10000 %}{% for b in 'x'*10000 %}{{ 'x'*10000 }}{% endfor %}{% endfor %}{{ question }}",
            )
            .unwrap()
        },
        expect: &["plain.txt:1", "at most 1000000 steps"],
    },
    Row {
        name: "a loop bomb in a judge prompt",
        setup: |d| {
            fs::write(
                d.join("judge.j2"),
                "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}<reference>{{ reference }}</reference><answer>{{ answer }}</answer>",
            )
            .unwrap();
            edit(&d.join("bench.yaml"), |t| {
                t.replace("kind: number", "kind: judge, prompt: judge.j2")
            });
        },
        expect: &["judge.j2:1", "at most 1000000 steps", "runaway loop"],
    },
    Row {
        name: "a repetition bomb in a judge prompt",
        setup: |d| {
            fs::write(
                d.join("judge.j2"),
                "{{ 'x' * 2000000000 }}<reference>{{ reference }}</reference><answer>{{ answer }}</answer>",
            )
            .unwrap();
            edit(&d.join("bench.yaml"), |t| {
                t.replace("kind: number", "kind: judge, prompt: judge.j2")
            });
        },
        expect: &["judge.j2:1", "render at most 8 MiB"],
    },
    Row {
        name: "a variant file whose name cannot be selected",
        setup: |d| {
            fs::rename(d.join("plain.txt"), d.join("x,y.txt")).unwrap();
            edit(&d.join("bench.yaml"), |t| {
                t.replace("plain.txt", "\"x,y.txt\"")
            });
        },
        expect: &["x,y.txt", "from the file name", "rename the file"],
    },
    Row {
        name: "a YAML case file that is not a list",
        setup: |d| {
            fs::write(d.join("cases.yaml"), "id: a\nexpected: 1\n").unwrap();
            edit(&d.join("bench.yaml"), |t| {
                t.replace("cases.jsonl", "cases.yaml")
            });
        },
        expect: &["cases.yaml:1", "invalid case file"],
    },
];

#[test]
fn every_malformed_input_exits_2_sends_nothing_and_says_where_and_how_to_fix() {
    assert!(ROWS.len() >= 20);
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let mut failures = Vec::new();
    for row in ROWS {
        let bench = arithmetic_bench(60, 2, "");
        let d = bench.path();
        (row.setup)(d);
        let out = promptgauge(d)
            .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let missing: Vec<&&str> = row
            .expect
            .iter()
            .filter(|e| !stderr.contains(**e))
            .collect();
        if std::env::var_os("SHOW").is_some() {
            eprintln!("--- {}\n{stderr}", row.name);
        }
        if out.status.code() != Some(2) || !missing.is_empty() || !stderr.contains("fix:") {
            failures.push(format!(
                "{}: exit {:?}, missing {missing:?} or a fix, in:\n{stderr}",
                row.name,
                out.status.code()
            ));
        }
        if stderr.contains("panicked") {
            failures.push(format!("{}: panicked", row.name));
        }
        if server.provider.stats().requests != 0 {
            failures.push(format!("{}: a request was sent", row.name));
            break;
        }
        assert!(
            !d.join("reports").exists(),
            "{}: a report folder was made",
            row.name
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_template_typo_is_named_once_at_the_template_with_the_variable_meant() {
    let dir = arithmetic_bench(60, 2, "");
    let d = dir.path();
    fs::write(d.join("plain.txt"), "Solve this.\n{{ questoin }}\n").unwrap();
    let out = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "plain.txt:2: message 1 of variant `plain` uses `questoin`, which no case has"
        ) && stderr.contains("did you mean `question`?"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("questoin").count(), 1, "{stderr}");
}

/// A misspelt filter or test — in a prompt's branch no case takes, in an `expr` (which runs
/// only on answers), in an `extract:` template — is refused by `check` and by `run` before
/// anything is sent, naming the file, the line, the name and the nearest one the engine
/// has (issue 52, tryout 7): the engine itself looks a filter up only when it renders it.
#[test]
fn a_misspelt_filter_or_test_is_refused_by_check_and_run_with_the_nearest_name() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    type Setup = (fn(&Path), &'static [&'static str]);
    let setups: [Setup; 3] = [
        (
            |d| {
                replace_line(
                    &d.join("careful.yaml"),
                    4,
                    "  - { role: user, content: \"{% if question == 'none' %}{{ question|lenght }}{% endif %}{{ question }}\" }",
                )
            },
            &["careful.yaml:4: message 2 uses an unknown filter `lenght` (did you mean `length`?)"],
        ),
        (
            |d| {
                edit(&d.join("bench.yaml"), |t| {
                    t.replace(
                        "grade: { kind: number }",
                        "grade:\n  kind: expr\n  expr: \"output|trim is strnig and output|wordcont < 5\"",
                    )
                })
            },
            &[
                "bench.yaml:6",
                "uses an unknown test `strnig` (did you mean `string`?)",
            ],
        ),
        (
            |d| add_to_bench(d, "extract: { template: \"{{ answer|trim|uper }}\" }\n"),
            &[
                "bench.yaml",
                "uses an unknown filter `uper` (did you mean `upper`?)",
            ],
        ),
    ];
    for (setup, said) in setups {
        let bench = arithmetic_bench(6, 2, "");
        let d = bench.path();
        setup(d);
        for command in ["check", "run"] {
            let out = promptgauge(d)
                .args([command, "bench.yaml", "--base-url", &url, "--model", "m"])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
            for s in said {
                assert!(stderr.contains(s), "{command}: {s:?} not in {stderr}");
            }
            assert!(stderr.contains("fix:"), "{stderr}");
        }
        assert_eq!(server.provider.stats().requests, 0);
    }
}
