//! Reports about a checked model, shared by the `diamond` command and the
//! Python package so that both say the same thing: the `check --json`
//! document ([`json`]) and the self-contained `--html` page ([`html`]).

pub mod html;
pub mod json;
