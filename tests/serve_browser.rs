//! `ingot serve`'s chat page in a real headless browser (Debian's chromium): the page opened with a
//! prompt in its URL streams the reply into the DOM, and that reply is the greedy text a raw
//! request with the same messages gets.
//!
//! The browser is driven over the Chrome DevTools Protocol on a pipe (`--remote-debugging-pipe`:
//! JSON messages ended by NUL, commands on the child's fd 3, replies on its fd 4), so the test
//! needs no WebSocket client and no port for the browser. Every wait is bounded by
//! `support::LIMIT`.
//!
//! Chromium is installed by `cargo xtask tools` (apt, as root). When it is missing the test fails,
//! unless `INGOT_SKIP_BROWSER_TESTS=1`, in which case it says on stdout that it skipped.

mod support;

#[cfg(target_os = "linux")]
mod browser {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc::{self, Receiver};
    use std::time::{Duration, Instant};

    use serde_json::{json, Value};

    use crate::support::LIMIT;

    /// The chromium binary: `INGOT_CHROMIUM`, else the first of Debian's names that runs.
    pub fn find() -> Result<String, String> {
        let candidates = match std::env::var("INGOT_CHROMIUM") {
            Ok(path) => vec![path],
            Err(_) => vec!["chromium".to_string(), "chromium-browser".to_string()],
        };
        for bin in &candidates {
            let ok = Command::new(bin)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Ok(bin.clone());
            }
        }
        Err(format!(
            "no chromium found (tried {}; `cargo xtask tools` installs Debian's `chromium` as root, \
             or set INGOT_CHROMIUM)",
            candidates.join(", ")
        ))
    }

    /// A headless chromium with a DevTools pipe; killed on drop.
    pub struct Browser {
        child: Child,
        commands: std::io::PipeWriter,
        replies: Receiver<Value>,
        next_id: u64,
        _profile: tempfile::TempDir,
    }

    /// `fd` duplicated to a descriptor >= 10, so that moving two of them onto 3 and 4 cannot
    /// clobber one with the other.
    fn above_ten(fd: i32) -> std::io::Result<i32> {
        // SAFETY: fcntl(F_DUPFD) only creates a descriptor; async-signal-safe, as pre_exec
        // requires.
        let high = unsafe { libc::fcntl(fd, libc::F_DUPFD, 10) };
        if high < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(high)
    }

    impl Browser {
        pub fn start(bin: &str) -> Browser {
            let profile = tempfile::tempdir().unwrap();
            let (cmd_read, commands) = std::io::pipe().expect("pipe");
            let (mut reply_read, reply_write) = std::io::pipe().expect("pipe");
            let (cmd_fd, reply_fd) = (cmd_read.as_raw_fd(), reply_write.as_raw_fd());
            let mut command = Command::new(bin);
            command
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--remote-debugging-pipe",
                ])
                .arg(format!("--user-data-dir={}", profile.path().display()))
                .arg("about:blank")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // SAFETY: between fork and exec only async-signal-safe calls (fcntl, dup2) run.
            unsafe {
                command.pre_exec(move || {
                    let (c, r) = (above_ten(cmd_fd)?, above_ten(reply_fd)?);
                    if libc::dup2(c, 3) < 0 || libc::dup2(r, 4) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let child = command.spawn().expect("start chromium");
            // The child holds its own ends; ours must close so that its exit ends our reads.
            drop((cmd_read, reply_write));
            let (tx, replies) = mpsc::channel();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                while let Ok(n) = reply_read.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.iter().position(|&b| b == 0) {
                        let msg: Vec<u8> = buf.drain(..=end).collect();
                        if let Ok(v) = serde_json::from_slice::<Value>(&msg[..end]) {
                            if tx.send(v).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            Browser {
                child,
                commands,
                replies,
                next_id: 0,
                _profile: profile,
            }
        }

        /// Sends one DevTools command and returns its `result`, skipping events in between.
        pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
            self.next_id += 1;
            let id = self.next_id;
            let mut msg = json!({ "id": id, "method": method, "params": params });
            if let Some(s) = session {
                msg["sessionId"] = json!(s);
            }
            let mut bytes = serde_json::to_vec(&msg).unwrap();
            bytes.push(0);
            self.commands.write_all(&bytes).expect("write to chromium");
            let deadline = Instant::now() + LIMIT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let reply = self
                    .replies
                    .recv_timeout(left)
                    .unwrap_or_else(|e| panic!("no reply from chromium to {method}: {e}"));
                if reply["id"] == json!(id) {
                    if let Some(err) = reply.get("error") {
                        panic!("chromium refused {method}: {err}");
                    }
                    return reply["result"].clone();
                }
            }
        }

        /// Opens `url` in a new tab; returns the DevTools session attached to it.
        pub fn open(&mut self, url: &str) -> String {
            let target = self.call(None, "Target.createTarget", json!({ "url": url }));
            let target_id = target["targetId"].as_str().expect("targetId").to_string();
            let attached = self.call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target_id, "flatten": true }),
            );
            attached["sessionId"]
                .as_str()
                .expect("sessionId")
                .to_string()
        }

        /// Evaluates `expression` in the page of `session`; returns its value.
        pub fn eval(&mut self, session: &str, expression: &str) -> Value {
            let r = self.call(
                Some(session),
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true }),
            );
            r["result"]["value"].clone()
        }

        /// Polls `expression` every 100 ms until `done` accepts its value; panics after `LIMIT`.
        pub fn wait_for(
            &mut self,
            session: &str,
            expression: &str,
            done: impl Fn(&Value) -> bool,
        ) -> Value {
            let deadline = Instant::now() + LIMIT;
            loop {
                let v = self.eval(session, expression);
                if done(&v) {
                    return v;
                }
                assert!(
                    Instant::now() < deadline,
                    "page did not finish within {LIMIT:?}: {v}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    impl Drop for Browser {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn chat_page_streams_the_greedy_reply_into_the_dom() {
    use serde_json::Value;
    use support::{greedy_chat, Server};

    let bin = match browser::find() {
        Ok(bin) => bin,
        Err(why) => {
            if std::env::var("INGOT_SKIP_BROWSER_TESTS").is_ok_and(|v| !v.is_empty() && v != "0") {
                println!(
                    "SKIPPED the chat page browser test (INGOT_SKIP_BROWSER_TESTS is set): {why}"
                );
                return;
            }
            panic!("{why}; set INGOT_SKIP_BROWSER_TESTS=1 to skip this test");
        }
    };

    let server = Server::start();
    let prompt = "Hi there";
    // The page sends the history [user: prompt] with the settings from the URL; the same request
    // raw:
    let expected = greedy_chat(&server.addr, prompt, 8);

    let mut chrome = browser::Browser::start(&bin);
    let session = chrome.open(&format!(
        "http://{}/?prompt=Hi%20there&temperature=0&max_tokens=8",
        server.addr
    ));
    let page = chrome.wait_for(
        &session,
        r#"JSON.stringify({
             state: document.body ? document.body.dataset.state : "loading",
             user: [...document.querySelectorAll(".msg.user")].map((e) => e.textContent),
             reply: [...document.querySelectorAll(".msg.assistant, .msg.error")].map((e) => e.textContent),
             model: document.getElementById("model") ? document.getElementById("model").textContent : ""
           })"#,
        // Finished: the reply ended (done or error) and the model list has arrived.
        |v| {
            let page: Value = serde_json::from_str(v.as_str().unwrap_or("{}")).unwrap_or_default();
            let ended = page["state"] == "done" || page["state"] == "error";
            ended && !page["model"].as_str().unwrap_or("").starts_with("connecting")
        },
    );
    let page: Value = serde_json::from_str(page.as_str().unwrap()).expect("page JSON");
    assert_eq!(page["state"], "done", "the page ended in error: {page}");
    assert_eq!(page["user"], serde_json::json!([prompt]), "{page}");
    assert_eq!(page["reply"], serde_json::json!([expected]), "{page}");
    assert_eq!(page["model"], "tiny", "{page}");
    println!("chromium ({bin}) showed the streamed reply {expected:?}");
}
