//! [`Latency`]: the statistics `diamond bench` reports of a set of run
//! times, for diamond's runs and tract's alike.

use std::time::Duration;

/// Median, 90th percentile and minimum of a set of run times.
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    pub median: Duration,
    pub p90: Duration,
    pub min: Duration,
}

impl Latency {
    /// The statistics of `times` (not empty).
    pub fn of(mut times: Vec<Duration>) -> Latency {
        times.sort();
        let at = |q: f64| times[((q * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1];
        Latency { median: at(0.5), p90: at(0.9), min: times[0] }
    }

    pub fn json(&self) -> serde_json::Value {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        serde_json::json!({ "median": ms(self.median), "p90": ms(self.p90), "min": ms(self.min) })
    }

    pub fn text(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!("median {:.3} ms, p90 {:.3} ms, min {:.3} ms", ms(self.median), ms(self.p90), ms(self.min))
    }
}
