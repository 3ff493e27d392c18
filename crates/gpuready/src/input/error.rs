//! The input layer's one error type: every way a file `check` is given can
//! be unusable, each naming the file, the document and the field.

use std::path::PathBuf;

/// Input that cannot be used. Always maps to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Encoding { path: PathBuf, message: String },
    #[error("{path}: document {doc}: not valid YAML or JSON: {message}")]
    Syntax {
        path: PathBuf,
        doc: usize,
        message: String,
    },
    #[error("{path}: document {doc}{what}: {field}: {message}")]
    Field {
        path: PathBuf,
        doc: usize,
        what: String,
        field: String,
        message: String,
    },
    #[error(
        "{path}: no {expected} objects found: the file holds no document, only empty ones or comments (a command whose output went to it may have failed); where there are none, kubectl writes an empty List: {{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": []}}"
    )]
    Empty {
        path: PathBuf,
        expected: &'static str,
    },
    #[error("{path}: stopped reading after {after} problems")]
    Stopped { path: PathBuf, after: usize },
    /// Every problem of a file, as the API server lists every problem of an
    /// object: one per line, each worded like a single error.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\nerror: "))]
    Several(Vec<InputError>),
}

impl InputError {
    /// One error, or all of them; None when there are none.
    pub(super) fn from_all(mut errors: Vec<InputError>) -> Option<InputError> {
        match errors.len() {
            0 => None,
            1 => Some(errors.remove(0)),
            _ => Some(InputError::Several(errors)),
        }
    }
}
