//! Colour for the text report: ANSI styles in the manner of rustc (bold red
//! `error`, bold yellow `warning`, bold blue `-->`, `|` and `=`), used only
//! when asked for or when stdout is a terminal and `NO_COLOR` is unset.

use std::io::IsTerminal;

/// The `--color` choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty.
    #[default]
    Auto,
    /// Always colour, even into a pipe or file.
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Whether to colour stdout: `always` and `never` decide alone; `auto`
    /// colours a terminal unless `NO_COLOR` is set to a non-empty value
    /// (<https://no-color.org>).
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
                !no_color && std::io::stdout().is_terminal()
            }
        }
    }
}

/// A text style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Bold red: `error[code]`.
    Error,
    /// Bold yellow: `warning[code]`.
    Warning,
    /// Bold blue: the gutter (`-->`, `|`, `=`).
    Gutter,
    /// Bold: the message, `note`, `help`.
    Bold,
}

impl Style {
    fn ansi(self) -> &'static str {
        match self {
            Style::Error => "\x1b[1;31m",
            Style::Warning => "\x1b[1;33m",
            Style::Gutter => "\x1b[1;34m",
            Style::Bold => "\x1b[1m",
        }
    }
}

/// Applies styles, or leaves text plain when colour is off.
#[derive(Clone, Copy, Debug)]
pub struct Painter {
    on: bool,
}

impl Painter {
    /// A painter that colours when `on`.
    pub fn new(on: bool) -> Painter {
        Painter { on }
    }

    /// `text` in `style` (followed by a reset), or `text` itself when colour is off.
    pub fn paint(&self, style: Style, text: &str) -> String {
        if self.on {
            format!("{}{text}\x1b[0m", style.ansi())
        } else {
            text.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_when_off_and_reset_after_each_span_when_on() {
        assert_eq!(Painter::new(false).paint(Style::Error, "error"), "error");
        assert_eq!(Painter::new(true).paint(Style::Error, "error"), "\x1b[1;31merror\x1b[0m");
    }

    #[test]
    fn always_and_never_ignore_the_terminal() {
        assert!(ColorChoice::Always.enabled());
        assert!(!ColorChoice::Never.enabled());
    }
}
