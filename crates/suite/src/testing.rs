//! Builders the tests of this crate and of the layers above start from (compiled for tests,
//! and for other crates' tests through the `test-support` feature).

use crate::FilePos;
use crate::cases::Case;

/// A case with no variables, no expected answer, nothing attached and no grade of its own,
/// on line 1 of `c.jsonl`: a test writes the fields it is about and takes the rest
/// (`Case { expected: vec!["42".into()], ..case() }`).
pub fn case() -> Case {
    Case {
        id: "c".into(),
        vars: Default::default(),
        expected: Vec::new(),
        expected_json: None,
        messages: Vec::new(),
        files: Vec::new(),
        tool_script: Vec::new(),
        grade: None,
        tags: Vec::new(),
        group: None,
        location: FilePos::line(std::path::Path::new("c.jsonl"), 1),
    }
}
