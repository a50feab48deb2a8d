//! The server under a CI-sized soak, in a process of its own: the test binary runs itself a second
//! time as the server (`SERVER_ROLE` set), so the open files, resident memory and live heap bytes
//! it reports are the server's alone, not those of the 64 clients that the soak makes and drops in
//! the first process.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use serde_json::json;
use support::*;

/// The system allocator, counting the bytes this process holds allocated (server and clients
/// alike). Resident memory also moves with the allocator's arenas and free lists; live bytes move
/// only with what the program keeps, so a leak grows them and fragmentation does not.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
/// Live bytes and live allocations by size class: class `c` holds sizes in (2^(c-1), 2^c]. What
/// grows between two rounds, by class, tells a buffer (one class, a few large blocks) from a table
/// or cache that keeps growing (many small ones).
static CLASS_BYTES: [AtomicIsize; CLASSES] = [const { AtomicIsize::new(0) }; CLASSES];
static CLASS_COUNT: [AtomicIsize; CLASSES] = [const { AtomicIsize::new(0) }; CLASSES];
const CLASSES: usize = 48;

fn class(size: usize) -> usize {
    ((usize::BITS - size.saturating_sub(1).leading_zeros()) as usize).min(CLASSES - 1)
}

fn count(size: usize, sign: isize) {
    LIVE.fetch_add(sign * size as isize, Ordering::Relaxed);
    let c = class(size);
    CLASS_BYTES[c].fetch_add(sign * size as isize, Ordering::Relaxed);
    CLASS_COUNT[c].fetch_add(sign, Ordering::Relaxed);
}

// SAFETY: every call forwards to `System` with the caller's arguments; the counters are only
// arithmetic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size(), 1);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        count(layout.size(), -1);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size(), 1);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(layout.size(), -1);
            count(new_size, 1);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes allocated and not yet freed, in KiB.
fn live_kib() -> i64 {
    LIVE.load(Ordering::Relaxed) as i64 / 1024
}

/// Open file descriptors and resident memory of this process.
fn fds_and_rss_kib() -> (usize, u64) {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0);
    (fds, rss)
}

/// Set in the environment of the second run of this binary, which serves instead of soaking.
const SERVER_ROLE: &str = "INGOT_SOAK_SERVER_ROLE";
/// Marks the server role's lines on its stdout.
const TAG: &str = "[soak-server]";
/// The server's request queue and body limit.
const QUEUE: usize = 4;
const MAX_BODY: usize = 64 * 1024;

/// The server role: serves the tiny model on 127.0.0.1, writes `base <url>` on stdout, then answers
/// each `stats` line on stdin with `stats <open files> <RSS KiB> <live heap KiB>`, and exits when
/// stdin closes (without running destructors). Lines carry a tag because the test harness writes on
/// the same stdout (and leaves its own line open there).
async fn serve_for_soak() {
    let mut opts = options();
    opts.queue = QUEUE;
    opts.max_body = MAX_BODY;
    let base = start(opts).await;
    println!("{TAG} base {base}");
    tokio::task::spawn_blocking(|| {
        for line in std::io::stdin().lock().lines() {
            match line.expect("stdin").trim() {
                "stats" => {
                    let (fds, rss) = fds_and_rss_kib();
                    println!("{TAG} stats {fds} {rss} {}", live_kib());
                }
                "classes" => {
                    let classes: Vec<String> = (0..CLASSES)
                        .map(|c| {
                            let b = CLASS_BYTES[c].load(Ordering::Relaxed);
                            let n = CLASS_COUNT[c].load(Ordering::Relaxed);
                            format!("{b}:{n}")
                        })
                        .collect();
                    println!("{TAG} classes {}", classes.join(" "));
                }
                _ => {}
            }
        }
    })
    .await
    .expect("the stats loop");
    // Ends here, with everything still held, so a heap profiler around this process counts what the
    // server holds at the end as not freed (and what grows between a short and a long soak shows
    // up).
    std::process::exit(0);
}

/// The server's process, seen from the soak: killed when dropped, so a failed soak leaves no server
/// behind.
struct ServerProcess {
    child: Child,
    /// The stats requests; closing it ends the server process.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl ServerProcess {
    /// Runs this test binary again, as the server; returns it and its base URL.
    /// `INGOT_SOAK_SERVER_WRAP` (a command line, e.g. `heaptrack -o /tmp/soak-server`) runs the
    /// server under that command.
    fn spawn(test: &str) -> (Self, String) {
        let exe = std::env::current_exe().expect("the test binary's path");
        let wrap = std::env::var("INGOT_SOAK_SERVER_WRAP").unwrap_or_default();
        let mut wrap = wrap.split_whitespace();
        let mut command = match wrap.next() {
            Some(program) => {
                let mut c = Command::new(program);
                c.args(wrap).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let mut child = command
            .args(["--exact", test, "--nocapture", "--test-threads", "1"])
            .env(SERVER_ROLE, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server process");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut server = Self {
            child,
            stdin,
            stdout,
        };
        let base = server.line("base ");
        (server, base)
    }

    /// What follows `TAG prefix` on the next stdout line that holds it (the harness's own lines are
    /// skipped).
    fn line(&mut self, prefix: &str) -> String {
        let tagged = format!("{TAG} {prefix}");
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .stdout
                .read_line(&mut line)
                .expect("read the server's stdout");
            assert!(
                n > 0,
                "the server process ended before writing `{prefix}...`"
            );
            if let Some(at) = line.find(&tagged) {
                return line[at + tagged.len()..].trim_end().to_string();
            }
        }
    }

    /// The server's open files, resident memory (KiB) and live heap bytes (KiB).
    fn stats(&mut self) -> (usize, u64, i64) {
        let stdin = self
            .stdin
            .as_mut()
            .expect("the server's stdin is open until drop");
        writeln!(stdin, "stats").expect("ask the server for its stats");
        stdin.flush().expect("flush");
        let line = self.line("stats ");
        let v: Vec<&str> = line.split(' ').collect();
        match v[..] {
            [f, r, l] => (number(f, &line), number(r, &line), number(l, &line)),
            _ => panic!("bad stats line {line:?}"),
        }
    }
}

impl ServerProcess {
    /// The server's live bytes and allocations per size class.
    fn classes(&mut self) -> Vec<(i64, i64)> {
        let stdin = self
            .stdin
            .as_mut()
            .expect("the server's stdin is open until drop");
        writeln!(stdin, "classes").expect("ask the server for its size classes");
        stdin.flush().expect("flush");
        let line = self.line("classes ");
        line.split(' ')
            .map(|pair| {
                let (b, n) = pair
                    .split_once(':')
                    .unwrap_or_else(|| panic!("bad class {pair:?}"));
                (number(b, &line), number(n, &line))
            })
            .collect()
    }
}

fn number<T: std::str::FromStr>(s: &str, line: &str) -> T {
    s.parse()
        .unwrap_or_else(|_| panic!("bad number {s:?} in stats line {line:?}"))
}

impl Drop for ServerProcess {
    /// Closes the server's stdin, so it exits on its own (and a profiler around it writes its
    /// data), and kills it if it has not within 10 s.
    fn drop(&mut self) {
        drop(self.stdin.take());
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A soak in CI size: 64 clients, each sending valid, malformed, wrongly typed, oversized and
/// abandoned requests to a server with a queue of 4, in three rounds (`INGOT_SOAK_ROUNDS` more).
/// Every request is answered with a status that names what it was (or dropped by its own client),
/// the server still serves afterwards, and the last round leaves open files, live heap bytes and
/// (loosely) resident memory where the second left them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mixed_soak_of_64_clients_leaves_files_and_memory_flat() {
    if std::env::var_os(SERVER_ROLE).is_some() {
        return serve_for_soak().await;
    }
    const CLIENTS: usize = 64;
    const PER_CLIENT: usize = 5;
    let max_body = MAX_BODY;
    let (mut server, base) =
        ServerProcess::spawn("a_mixed_soak_of_64_clients_leaves_files_and_memory_flat");
    let round = |round: usize| {
        let base = base.clone();
        async move {
            let tasks: Vec<_> = (0..CLIENTS)
                .map(|c| {
                    let base = base.clone();
                    tokio::spawn(async move {
                        // A client of its own, dropped at the end: its connections close with it.
                        let http = client();
                        let url = format!("{base}/v1/chat/completions");
                        let mut seen = Vec::new();
                        for r in 0..PER_CLIENT {
                            let kind = (c + r + round) % 5;
                            let req = match kind {
                                0 => http
                                    .post(&url)
                                    .json(&chat_body(&format!("soak {c} {r}"), 2)),
                                1 => http
                                    .post(&url)
                                    .header("content-type", "application/json")
                                    .body("{\"messages\": [oops"),
                                2 => http
                                    .post(&url)
                                    .header("content-type", "text/plain")
                                    .body(chat_body("plain", 2).to_string()),
                                3 => http
                                    .post(&url)
                                    .header("content-type", "application/json")
                                    .body(vec![b' '; max_body + 1]),
                                _ => {
                                    let mut body = chat_body("abandoned", 64);
                                    body["stream"] = json!(true);
                                    http.post(&url).json(&body)
                                }
                            };
                            let resp = req
                                .send()
                                .await
                                .unwrap_or_else(|e| panic!("kind {kind}: no answer: {e:?}"));
                            let status = resp.status().as_u16();
                            let allowed: &[u16] = match kind {
                                0 => &[200, 429],
                                1 => &[400],
                                2 => &[415],
                                3 => &[413],
                                _ => &[200, 429],
                            };
                            assert!(allowed.contains(&status), "kind {kind}: status {status}");
                            if kind == 4 {
                                // Leave mid-stream: the generation must stop without us.
                                drop(resp);
                            } else {
                                let _ = resp.bytes().await;
                            }
                            seen.push((kind, status));
                        }
                        seen
                    })
                })
                .collect();
            let all = tokio::time::timeout(LIMIT, futures_util::future::join_all(tasks))
                .await
                .expect("the round ends in time");
            all.into_iter()
                .flat_map(|r| r.expect("client task"))
                .collect::<Vec<_>>()
        }
    };
    // Settles: the abandoned generations are cancelled and the connections closed.
    let settle = |base: String| async move {
        for _ in 0..100 {
            if metric(&base, "ingot_queue_depth").await == 0.0
                && metric(&base, "ingot_busy").await.max(0.0) == 0.0
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    // Rounds: 3 in CI; `INGOT_SOAK_ROUNDS=N` soaks longer by hand (docs/perf.md records such a
    // run). The first round only warms up: what the runtime and the clients allocate once, on first
    // need, is not always done by its end (a loaded CI machine once left it 105 KiB short of its
    // steady level, reached in round 1).
    let rounds: usize = std::env::var("INGOT_SOAK_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(3);
    let start = std::time::Instant::now();
    let mut requests = 0;
    let mut served = 0;
    let mut after = Vec::new();
    let classes_every: Option<usize> = std::env::var("INGOT_SOAK_CLASSES")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut base_classes = None;
    for r in 0..rounds {
        let seen = round(r).await;
        requests += seen.len();
        served += seen.iter().filter(|&&(k, s)| k == 0 && s == 200).count();
        settle(base.clone()).await;
        after.push(server.stats());
        // `INGOT_SOAK_CLASSES=N`: every N rounds, what the live heap gained or lost since round N,
        // per size class.
        if let Some(every) = classes_every.filter(|&n| n > 0 && r >= n && r % n == 0) {
            let now = server.classes();
            match &base_classes {
                None => base_classes = Some(now),
                Some(base) => {
                    let moved: Vec<String> = (0..now.len())
                        .filter(|&c| (now[c].0 - base[c].0).abs() >= 1024)
                        .map(|c| {
                            format!(
                                "<=2^{c}: {:+} B in {:+} blocks",
                                now[c].0 - base[c].0,
                                now[c].1 - base[c].1
                            )
                        })
                        .collect();
                    eprintln!(
                        "soak round {r}: live heap since round {every}: {}",
                        moved.join(", ")
                    );
                }
            }
        }
        if rounds > 3 {
            let (fds, rss, live) = after[r];
            eprintln!(
                "soak round {r}: {:.0} s, open files {fds}, RSS {rss} KiB, live heap {live} KiB",
                start.elapsed().as_secs_f64()
            );
        }
    }
    // The baseline: after the second round, or in a long soak after its first fifth (the server's
    // buffers and the runtime's pools reach their working sizes over the first few hundred rounds).
    let warm = (rounds / 5).max(1);
    let ((fds1, rss1, live1), (fds2, rss2, live2)) = (after[warm], after[rounds - 1]);
    eprintln!(
        "soak: {rounds} rounds, {requests} requests, {served} valid ones served in {:.0} s; from round {warm}: open \
         files {fds1} -> {fds2}, RSS {rss1} -> {rss2} KiB, live heap {live1} -> {live2} KiB",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(requests, rounds * CLIENTS * PER_CLIENT);
    assert!(served > 0, "no valid request was served");
    assert!(fds2 <= fds1 + 8, "open files grew from {fds1} to {fds2}");
    // Live bytes are the leak test: measured +0 to +19 KiB a round after round 1, so 64 KiB catches
    // a leak of 200 bytes per request. Resident memory also grows with the allocator's arenas (it
    // rose by 9 MB over the first 10 rounds while live bytes stayed flat), so its bound is only
    // against gross growth.
    assert!(
        live2 <= live1 + 64,
        "live heap grew from {live1} to {live2} KiB"
    );
    assert!(
        rss2 <= rss1 + 32 * 1024,
        "resident memory grew from {rss1} to {rss2} KiB"
    );
    let (status, v) = post(&base, "/v1/chat/completions", &chat_body("still there?", 2)).await;
    assert_eq!(status, 200, "{v}");
}
