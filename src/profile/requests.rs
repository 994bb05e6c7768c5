//! A server's requests, as `serve` profiled them: per route, how many were answered and
//! how, how long each took, and the CPU time their handlers took.

use serde::{Deserialize, Serialize};

/// The requests a server answered while it was profiled, route by route.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Requests {
    /// Each route, in the order its first request was answered.
    pub routes: Vec<Route>,
    /// The same component's requests served plain (`serve --plain FILE`), whose figures
    /// the report shows beside these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain: Option<Box<Requests>>,
}

/// The requests of one route: a method and a path, the query left out (`GET /fib`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// The method and the path.
    pub route: String,
    /// Requests answered.
    pub requests: u64,
    /// Of those, answered with a 5xx status: by the handler, or by the server for a
    /// handler that trapped or returned without answering.
    pub server_errors: u64,
    /// Of those, whose handler trapped.
    pub trapped: u64,
    /// Each request's latency, in nanoseconds, from its arrival to its handler's return
    /// (its body written), in ascending order once [`Requests::sort`] has run.
    pub latencies_ns: Vec<u64>,
    /// The CPU time of the requests' handlers, in nanoseconds, their instances'
    /// instantiation included: the worker thread's own CPU clock, read around each.
    pub cpu_ns: u64,
}

impl Route {
    /// The latency that a share `q` (0 to 1) of the requests took at most: the nearest
    /// rank's, exact.
    pub fn latency(&self, q: f64) -> u64 {
        let n = self.latencies_ns.len();
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        self.latencies_ns[rank - 1]
    }
}

impl Requests {
    /// Counts one answered request of `route`.
    pub fn add(&mut self, route: &str, answer: Answer) {
        let at = match self.routes.iter().position(|r| r.route == route) {
            Some(at) => at,
            None => {
                self.routes.push(Route {
                    route: route.to_string(),
                    ..Route::default()
                });
                self.routes.len() - 1
            }
        };
        let r = &mut self.routes[at];
        r.requests += 1;
        r.server_errors += u64::from(answer.status >= 500);
        r.trapped += u64::from(answer.trapped);
        r.latencies_ns.push(answer.latency_ns);
        r.cpu_ns += answer.cpu_ns;
    }

    /// Puts each route's latencies in ascending order, as [`Route::latency`] reads them,
    /// once every request has been added.
    pub fn sort(&mut self) {
        for r in &mut self.routes {
            r.latencies_ns.sort_unstable();
        }
    }

    /// Every request, of every route.
    pub fn total(&self) -> u64 {
        self.routes.iter().map(|r| r.requests).sum()
    }

    /// The requests of `self` and `other` together: the same routes' summed, their
    /// latencies joined (the plain server's beside them, `self`'s).
    pub fn merged(&self, other: &Requests) -> Requests {
        let mut out = self.clone();
        for theirs in &other.routes {
            match out.routes.iter_mut().find(|r| r.route == theirs.route) {
                Some(ours) => {
                    ours.requests += theirs.requests;
                    ours.server_errors += theirs.server_errors;
                    ours.trapped += theirs.trapped;
                    ours.cpu_ns += theirs.cpu_ns;
                    ours.latencies_ns.extend(&theirs.latencies_ns);
                    ours.latencies_ns.sort_unstable();
                }
                None => out.routes.push(theirs.clone()),
            }
        }
        out
    }
}

/// How one request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// The status it was answered with.
    pub status: u16,
    /// Whether its handler trapped.
    pub trapped: bool,
    /// From its arrival to its handler's return, in nanoseconds.
    pub latency_ns: u64,
    /// Its handler's CPU time, in nanoseconds.
    pub cpu_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, latency_ns: u64) -> Answer {
        Answer {
            status,
            trapped: status == 500,
            latency_ns,
            cpu_ns: 10,
        }
    }

    #[test]
    fn percentiles_are_the_nearest_ranks_and_routes_merge() {
        let mut one = Requests::default();
        for l in (1..=100).rev() {
            one.add("GET /a", answer(200, l));
        }
        one.add("GET /b", answer(500, 7));
        one.sort();
        let a = &one.routes[0];
        assert_eq!(
            (a.latency(0.5), a.latency(0.9), a.latency(0.99)),
            (50, 90, 99)
        );
        assert_eq!(a.latency(1.0), 100);
        let both = one.merged(&one);
        assert_eq!(both.total(), 202);
        assert_eq!(both.routes[1].trapped, 2);
        assert_eq!(both.routes[0].latency(0.5), 50);
        assert_eq!(both.routes[0].cpu_ns, 2000);
    }
}
