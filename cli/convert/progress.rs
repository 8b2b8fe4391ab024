//! What a batch shows while it runs and when it ends.
//!
//! On a terminal: an `indicatif` bar over all models (count, rate, ETA) and
//! one spinner per model in flight, with failures printed above them.
//! Otherwise (a pipe, a CI log): one plain line per finished model. Then a
//! summary table either way.

use diamond::batch::{BadInput, Job, Outcome, Status};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// What a batch shows, made once the batch knows its jobs.
#[derive(Default)]
pub struct Progress(std::sync::OnceLock<Display>);

impl diamond::batch::Progress for Progress {
    type Flight = InFlight;

    fn planned(&self, jobs: &[Job]) {
        let width = jobs.iter().map(|j| j.key.len()).max().unwrap_or(0).min(60);
        let _ = self.0.set(Display::new(jobs.len(), width));
    }

    fn rejected(&self, bad: &BadInput) {
        eprintln!("error: {}: {}", bad.input.display(), bad.message);
    }

    fn started(&self, key: &str) -> InFlight {
        self.0.get().map_or(InFlight(None), |d| d.start(key))
    }

    fn finished(&self, flight: InFlight, outcome: &Outcome, key: &str) {
        if let Some(display) = self.0.get() {
            display.finish(flight, outcome, key);
        }
    }
}

impl Progress {
    /// Clears the bars once the batch is over.
    pub fn close(&self) {
        if let Some(display) = self.0.get() {
            display.close();
        }
    }
}

/// The display of a running batch.
struct Display {
    total: usize,
    done: AtomicUsize,
    bars: Option<(MultiProgress, ProgressBar)>,
    width: usize,
}

/// One model in flight.
pub struct InFlight(Option<ProgressBar>);

impl Display {
    /// A display for `total` models; `width` pads the input column.
    fn new(total: usize, width: usize) -> Display {
        let bars = std::io::stderr().is_terminal().then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(10));
            let style = ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40.cyan/blue}] {pos}/{len} models · {per_sec} · ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            let overall = multi.add(ProgressBar::new(total as u64).with_style(style));
            (multi, overall)
        });
        Display { total, done: AtomicUsize::new(0), bars, width }
    }

    /// A model starts.
    pub fn start(&self, key: &str) -> InFlight {
        let Some((multi, overall)) = &self.bars else { return InFlight(None) };
        let style =
            ProgressStyle::with_template("  {spinner} {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner());
        let bar =
            multi.insert_before(overall, ProgressBar::new_spinner().with_style(style).with_message(key.to_string()));
        bar.enable_steady_tick(Duration::from_millis(120));
        InFlight(Some(bar))
    }

    /// A model ended.
    pub fn finish(&self, flight: InFlight, outcome: &Outcome, key: &str) {
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let line = self.line(n, outcome, key);
        match (&self.bars, flight.0) {
            (Some((multi, overall)), bar) => {
                if let Some(bar) = bar {
                    bar.finish_and_clear();
                    multi.remove(&bar);
                }
                if outcome.status != Status::Converted && outcome.status != Status::Skipped {
                    let _ = multi.println(&line);
                }
                overall.inc(1);
            }
            (None, _) => eprintln!("{line}"),
        }
    }

    /// `[ 12/200] converted  zoo/a.onnx (0.13 s, 153 nodes, 2 warnings)`.
    fn line(&self, n: usize, o: &Outcome, key: &str) -> String {
        let digits = self.total.to_string().len();
        let mut line = format!("[{n:>digits$}/{}] {:<10} {key:<w$}", self.total, o.status.as_str(), w = self.width);
        let mut facts = vec![format!("{:.2} s", o.seconds)];
        if let (Some(nodes), Some(written)) = (o.nodes, o.nodes_written) {
            facts.push(format!("{nodes} -> {written} nodes"));
        } else if let Some(nodes) = o.nodes {
            facts.push(format!("{nodes} nodes"));
        }
        if o.errors > 0 {
            facts.push(format!("{} errors", o.errors));
        }
        if o.warnings > 0 {
            facts.push(format!("{} warnings", o.warnings));
        }
        line = format!("{} ({})", line.trim_end(), facts.join(", "));
        if let Some(message) = &o.message {
            line += &format!(": {message}");
        }
        line
    }

    /// Clears the bars before the summary.
    pub fn close(&self) {
        if let Some((multi, overall)) = &self.bars {
            overall.finish_and_clear();
            let _ = multi.clear();
        }
    }
}

/// The end-of-run table.
pub fn summary(outcomes: &[Outcome], seconds: f64, jobs: usize, interrupted: usize) -> String {
    let count = |s: Status| outcomes.iter().filter(|o| o.status == s).count();
    let warnings: usize = outcomes.iter().filter(|o| o.status == Status::Converted).map(|o| o.warnings).sum();
    let mut text = String::from("\nstatus      models\n");
    for status in [Status::Converted, Status::Skipped, Status::Errors, Status::Unreadable, Status::Failed] {
        text += &format!("{:<10} {:>7}\n", status.as_str(), count(status));
    }
    if interrupted > 0 {
        text += &format!("{:<10} {:>7}\n", "not run", interrupted);
    }
    text += &format!("{:<10} {:>7}  (in converted models)\n", "warnings", warnings);
    let rate = if seconds > 0.0 { outcomes.len() as f64 / seconds } else { 0.0 };
    text += &format!("time {seconds:.2} s, {rate:.1} models/s with {jobs} worker(s)");
    if let Some(peak) = peak_memory_mib() {
        text += &format!("; peak memory {peak} MiB");
    }
    text.push('\n');
    text
}

/// The process's peak resident memory (Linux `VmHWM`), in MiB.
pub fn peak_memory_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.div_ceil(1024))
}
