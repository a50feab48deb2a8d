//! Shared by the tests that run `ingot` as a process: a bounded HTTP/1.0 request, a server on the
//! tiny synthetic model at a free port on 127.0.0.1 (learned from its "listening on" line), killed
//! on drop, the Python interpreter with the packages `cargo xtask tools` installs, and a greedy
//! `ingot run`.

// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const EXE: &str = env!("CARGO_BIN_EXE_ingot");
/// Bound of every wait on the server.
pub const LIMIT: Duration = Duration::from_secs(60);

/// `ingot run -m model -c 256 -p prompt -n n --temp 0 --backend backend` and `extra`: a greedy run
/// within the trained model's 256-position context.
pub fn greedy_run(
    model: &std::path::Path,
    (prompt, n): (&str, &str),
    backend: &str,
    extra: &[&std::ffi::OsStr],
) -> std::process::Output {
    Command::new(EXE)
        .args(["run", "-m"])
        .arg(model)
        .args(["-c", "256", "-p", prompt, "-n", n, "--temp", "0"])
        .args(["--backend", backend])
        .args(extra)
        .output()
        .expect("start ingot")
}

/// One HTTP/1.0 request; returns the status line and the body.
pub fn http(addr: &str, method: &str, path: &str, body: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("response");
    let (head, body) = out.split_once("\r\n\r\n").expect("headers end");
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The greedy reply of a raw, non-streamed chat request with one user message.
pub fn greedy_chat(addr: &str, prompt: &str, max_tokens: usize) -> String {
    let body = serde_json::json!({
        "messages": [{ "role": "user", "content": prompt }],
        "max_tokens": max_tokens,
        "temperature": 0,
    });
    let (status, body) = http(addr, "POST", "/v1/chat/completions", &body.to_string());
    assert!(status.contains(" 200 "), "{status} {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    let reply = v["choices"][0]["message"]["content"]
        .as_str()
        .expect("content")
        .to_string();
    assert!(!reply.is_empty(), "the greedy reply is empty: {body}");
    reply
}

/// A running `ingot serve` (on the tiny synthetic model, or the demo's); killed on drop.
pub struct Server {
    pub child: Child,
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Server {
    pub fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("tiny.gguf");
        let synth = Command::new(EXE)
            .args([
                "synth", "--preset", "tiny", "--layout", "mla", "--quant", "q4_k_m", "--seed",
                "42", "-o",
            ])
            .arg(&model)
            .output()
            .expect("ingot synth");
        assert!(
            synth.status.success(),
            "{}",
            String::from_utf8_lossy(&synth.stderr)
        );
        let mut serve = Command::new(EXE);
        serve
            .args([
                "serve",
                "--port",
                "0",
                "--ctx",
                "128",
                "--backend",
                "cpu",
                "-q",
                "-m",
            ])
            .arg(&model);
        Server::spawn(serve, dir)
    }

    /// `ingot serve -m MODEL --port 0 -q` with `extra` arguments.
    pub fn serve(model: &std::path::Path, extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut serve = Command::new(EXE);
        serve
            .args(["serve", "--port", "0", "-q", "-m"])
            .arg(model)
            .args(extra);
        Server::spawn(serve, dir)
    }

    /// `ingot demo --serve` on a free port, its model unpacked into a fresh cache directory.
    pub fn demo() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut demo = Command::new(EXE);
        demo.args(["demo", "--serve", "--port", "0"])
            .env("INGOT_CACHE_DIR", dir.path());
        Server::spawn(demo, dir)
    }

    /// Starts `cmd` (a server that prints "listening on http://ADDR" on stderr) and waits for that
    /// line.
    fn spawn(mut cmd: Command, dir: tempfile::TempDir) -> Server {
        let mut child = cmd.stderr(Stdio::piped()).spawn().expect("ingot serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("listening on http://") {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
            }
        });
        let addr = match rx.recv_timeout(LIMIT) {
            Ok(a) => a,
            Err(e) => {
                let _ = child.kill();
                panic!("no 'listening on' line: {e}");
            }
        };
        assert!(addr.starts_with("127.0.0.1:"), "{addr}");
        Server {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[allow(unused_imports)]
pub use ingot_testdata::python;
