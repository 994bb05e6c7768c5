//! The report's section of a server's requests: route by route, how many were answered
//! and how, their latency's percentiles, and their handlers' CPU time per request.

use std::fmt::Write as _;

use super::BOLD;
use crate::format::units::{count, time};
use crate::profile::{Requests, Route};

/// Writes the requests section, where the profile is a server's.
pub(super) fn requests(out: &mut String, requests: Option<&Requests>) {
    let Some(requests) = requests.filter(|r| !r.routes.is_empty()) else {
        return;
    };
    let _ = writeln!(
        out,
        "\n{BOLD}Requests{BOLD:#} (latency: from arrival to the handler's return, exact percentiles; CPU: the handler's own, its instance's instantiation included, shared among requests served at once in one instance)"
    );
    let _ = writeln!(
        out,
        "{:>9} {:>6} {:>8} {:>10} {:>10} {:>10} {:>12}  route",
        "requests", "5xx", "trapped", "p50", "p90", "p99", "CPU/request"
    );
    let plain = requests.plain.as_deref();
    for r in &requests.routes {
        row(out, r, "");
        if let Some(p) = plain.and_then(|p| p.routes.iter().find(|p| p.route == r.route)) {
            row(out, p, " (plain)");
        }
    }
}

/// One route's row (`label` after its name).
fn row(out: &mut String, r: &Route, label: &str) {
    let _ = writeln!(
        out,
        "{:>9} {:>6} {:>8} {:>10} {:>10} {:>10} {:>12}  {}{label}",
        count(r.requests),
        count(r.server_errors),
        count(r.trapped),
        time(r.latency(0.5)),
        time(r.latency(0.9)),
        time(r.latency(0.99)),
        time(r.cpu_ns / r.requests.max(1)),
        r.route
    );
}

/// The requests section alone: what a server run as it is, unprofiled, reports.
pub fn requests_report(served: &Requests) -> String {
    let mut out = String::new();
    requests(&mut out, Some(served));
    out
}
