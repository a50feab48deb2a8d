//! Hostile files and careless flags, as a user meets them on the command line: a header whose
//! `block_count` no file of its size can hold; output paths that already hold something (another
//! file, the command's own input, a FIFO, a device node, a directory); sampling and server flags
//! out of range. Each ends in one line naming the problem and the fix, exit code 1, and nothing
//! written or replaced.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::EXE;

/// The small quantized golden model: 3 layers, layers 1 and 2 MoE with 16 experts.
fn model() -> PathBuf {
    ingot_testdata::golden("tiny-mla-q4_k_m/model.gguf")
}

/// Bound of one `ingot` command here: each either fails at once or runs a few tokens of the tiny
/// model.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs `cmd` to completion with its output captured, killing it (and failing the test) after
/// [`LIMIT`]: a command that blocks (a FIFO opened as a model) ends the test instead of hanging it.
fn bounded(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ingot");
    let mut pipes = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let readers = (
        std::thread::spawn(move || read_all(&mut pipes.0)),
        std::thread::spawn(move || read_all(&mut pipes.1)),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > LIMIT {
            child.kill().expect("kill");
            child.wait().expect("reap");
            panic!("{cmd:?} still running after {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: readers.0.join().unwrap(),
        stderr: readers.1.join().unwrap(),
    }
}

fn read_all(r: &mut impl Read) -> Vec<u8> {
    let mut v = Vec::new();
    r.read_to_end(&mut v).expect("read a pipe");
    v
}

fn ingot(args: &[&str]) -> Output {
    let mut cmd = Command::new(EXE);
    cmd.args(args);
    bounded(cmd)
}

/// `ingot ARGS` fails with exit code 1 and one line on stderr that contains every one of `want`.
fn refused(args: &[&str], want: &[&str]) {
    let out = ingot(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: {err:?} does not say {w:?}");
    }
    assert_eq!(
        err.trim().lines().count(),
        1,
        "{args:?}: more than one line: {err}"
    );
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// A keep list for [`model`] keeping half of the experts.
fn keep_file(dir: &Path) -> PathBuf {
    let keep = dir.join("keep.json");
    std::fs::write(
        &keep,
        r#"{"1": [0, 1, 2, 3, 4, 5, 6, 7], "2": [8, 9, 10, 11, 12, 13, 14, 15]}"#,
    )
    .unwrap();
    keep
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: a NUL-terminated path and a mode; mkfifo touches nothing else.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

/// A character device node: a copy of /dev/null's (1, 3) made in `dir` where the process may
/// (root), else /dev/null itself. Either way a write refused by type leaves it a character device.
fn char_device(dir: &Path) -> PathBuf {
    let node = dir.join("null");
    let c = std::ffi::CString::new(s(&node)).unwrap();
    // SAFETY: a NUL-terminated path, a mode and a device number.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    if rc == 0 {
        node
    } else {
        PathBuf::from("/dev/null")
    }
}

fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

/// No temporary file may be left in `dir`.
fn assert_no_temporaries(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn slice_refuses_an_existing_output_without_force_and_replaces_it_with() {
    let dir = tempfile::tempdir().unwrap();
    let keep = keep_file(dir.path());
    let other = dir.path().join("other.gguf");
    std::fs::write(&other, b"another model").unwrap();
    let m = model();
    refused(
        &["slice", s(&m), s(&other), "--keep", s(&keep)],
        &["already exists", "--force"],
    );
    assert_eq!(std::fs::read(&other).unwrap(), b"another model");
    let out = ingot(&["slice", s(&m), s(&other), "--keep", s(&keep), "--force"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::metadata(&other).unwrap().len() > 1000);
    assert_no_temporaries(dir.path());
}

#[test]
fn slice_never_writes_onto_its_input_or_keep_file_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let keep = keep_file(dir.path());
    let keep_before = std::fs::read(&keep).unwrap();
    // A copy of the model in the temporary folder, so that a wrong answer cannot damage the golden
    // file.
    let input = dir.path().join("in.gguf");
    std::fs::copy(model(), &input).unwrap();
    let input_before = std::fs::read(&input).unwrap();
    for force in [false, true] {
        let f = if force { "--force" } else { "--keep" };
        let mut args = vec!["slice", s(&input), s(&keep), "--keep", s(&keep)];
        if force {
            args.push(f);
        }
        refused(&args, &["is the input", "keep.json"]);
        let mut args = vec!["slice", s(&input), s(&input), "--keep", s(&keep)];
        if force {
            args.push(f);
        }
        refused(&args, &["is the input", "in.gguf"]);
    }
    assert_eq!(std::fs::read(&keep).unwrap(), keep_before);
    assert_eq!(std::fs::read(&input).unwrap(), input_before);
    assert_no_temporaries(dir.path());
}

#[test]
fn outputs_never_replace_a_fifo_a_device_or_a_directory_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let keep = keep_file(dir.path());
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let device = char_device(dir.path());
    let folder = dir.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    let m = model();
    for (path, kind) in [
        (&fifo, "is a FIFO"),
        (&device, "is a character device"),
        (&folder, "is a directory"),
    ] {
        for force in [&[][..], &["--force"][..]] {
            let mut slice = vec!["slice", s(&m), s(path), "--keep", s(&keep)];
            slice.extend_from_slice(force);
            refused(&slice, &[kind, "not a regular file"]);
            let mut synth = vec!["synth", "--preset", "tiny", "-o", s(path)];
            synth.extend_from_slice(force);
            refused(&synth, &[kind, "not a regular file"]);
        }
    }
    assert!(is_fifo(&fifo), "the FIFO was replaced");
    assert!(is_char_device(&device), "the device node was replaced");
    assert!(folder.is_dir(), "the directory was replaced");
    assert_no_temporaries(dir.path());
}

#[test]
fn a_routing_trace_never_replaces_the_model_and_needs_force_for_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("tiny.gguf");
    std::fs::copy(model(), &m).unwrap();
    let before = std::fs::read(&m).unwrap();
    let run = |trace: &Path, force: bool| {
        let mut args = vec![
            "run",
            "-m",
            s(&m),
            "-p",
            "Hello",
            "-n",
            "2",
            "--temp",
            "0",
            "--backend",
            "cpu",
            "--trace-routing",
            s(trace),
        ];
        if force {
            args.push("--force");
        }
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let refused_owned = |args: Vec<String>, want: &[&str]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, want);
    };
    refused_owned(run(&m, false), &["is the input", "tiny.gguf"]);
    refused_owned(run(&m, true), &["is the input", "tiny.gguf"]);
    assert_eq!(std::fs::read(&m).unwrap(), before, "the model changed");

    let old = dir.path().join("old.rtr");
    std::fs::write(&old, b"an earlier trace").unwrap();
    refused_owned(run(&old, false), &["already exists", "--force"]);
    assert_eq!(std::fs::read(&old).unwrap(), b"an earlier trace");
    let owned = run(&old, true);
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let out = ingot(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(std::fs::read(&old).unwrap(), b"an earlier trace");
    assert_no_temporaries(dir.path());
}

#[test]
fn run_refuses_sampling_flags_the_server_refuses() {
    let m = model();
    let m = s(&m);
    for (flag, value, range) in [
        ("--temp", "-1", "between 0 and 100"),
        ("--temp", "nan", "between 0 and 100"),
        ("--temp", "inf", "between 0 and 100"),
        ("--top-p", "2", "between 0 and 1"),
        ("--min-p", "5", "between 0 and 1"),
        ("--repeat-penalty", "-3", "between 0 and 100"),
        ("--repeat-penalty", "nan", "between 0 and 100"),
    ] {
        let arg = format!("{flag}={value}");
        let args = [
            "run",
            "-m",
            m,
            "-p",
            "Hello",
            "-n",
            "1",
            "--backend",
            "cpu",
            &arg,
        ];
        refused(&args, &[flag, range]);
    }
}

#[test]
fn serve_refuses_an_impossible_queue_and_an_empty_api_key() {
    let m = model();
    let m = s(&m);
    for q in ["0", "18446744073709551615", "4097"] {
        refused(
            &["serve", "-m", m, "--port", "0", "--queue", q],
            &["--queue", "out of range 1..=4096"],
        );
    }
    refused(
        &["serve", "-m", m, "--port", "0", "--api-key", ""],
        &["--api-key", "empty"],
    );
    refused(
        &["serve", "-m", m, "--port", "0", "--api-key", "  "],
        &["--api-key", "empty"],
    );
    let mut cmd = Command::new(EXE);
    cmd.args(["serve", "-m", m, "--port", "0"])
        .env("INGOT_API_KEY", "");
    let out = bounded(cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("INGOT_API_KEY") && err.contains("is empty"),
        "{err}"
    );
}

/// A FIFO as the model blocked `inspect` forever in its open; a directory failed with "mmap: No
/// such device". Both are refused by name, as is a FIFO or directory given to `replay` as its
/// trace.
#[test]
fn model_and_trace_inputs_must_be_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("model.gguf");
    mkfifo(&fifo);
    let folder = dir.path().join("folder.gguf");
    std::fs::create_dir(&folder).unwrap();
    for (path, kind) in [(&fifo, "is a FIFO"), (&folder, "is a directory")] {
        let p = s(path);
        refused(&["inspect", p], &[kind, "not a regular file"]);
        refused(
            &["run", "-m", p, "-p", "Hello", "-n", "1", "--backend", "cpu"],
            &[kind, "not a regular file"],
        );
        refused(
            &["replay", p, "--cache", "8"],
            &[kind, "not a regular file"],
        );
    }
}

/// SIGTERM ends `ingot serve` within its shutdown grace even while a client holds a half-sent
/// request (headers complete, body not), which graceful shutdown alone would wait for indefinitely.
#[test]
fn serve_exits_on_sigterm_despite_a_half_sent_request() {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(EXE)
        .args([
            "serve",
            "-m",
            s(&model()),
            "--port",
            "0",
            "--backend",
            "cpu",
            "--ctx",
            "64",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ingot serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = match lines.next() {
            Some(Ok(line)) => line,
            _ => {
                let _ = child.kill();
                panic!("ingot serve ended before listening");
            }
        };
        if let Some(rest) = line.strip_prefix("listening on http://") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Drain stderr so the server never blocks on it.
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let mut held = std::net::TcpStream::connect(&addr).expect("connect");
    write!(
        held,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: 1000\r\n\r\n{{"
    )
    .unwrap();
    held.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(30) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("ingot serve still running 30 s after SIGTERM with a half-sent request open");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}: {:?}", drain.join());
    drop(held);
}

/// A header claiming 10^7 blocks (which, believed, would allocate 16 GB and run for a minute) is
/// refused by `inspect` and `run` from the structural check, which names the key and its value.
#[test]
fn a_block_count_the_file_cannot_hold_is_named_by_inspect_and_run() {
    use ingot_gguf::{GgufFile, MetaValue};
    use ingot_synth::variant::{tensors_of, write_variant};
    let dir = tempfile::tempdir().unwrap();
    let src = GgufFile::open(&model()).unwrap();
    let path = dir.path().join("blocks.gguf");
    let set = [("deepseek2.block_count", MetaValue::U32(10_000_000))];
    write_variant(&path, &src, &set, &tensors_of(&src)).unwrap();
    let p = s(&path);
    let want = "deepseek2.block_count has an invalid value: 10000000 cannot be right";
    let out = ingot(&["inspect", p]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(want), "{text}");
    refused(
        &["run", "-m", p, "-p", "Hello", "-n", "1", "--backend", "cpu"],
        &[want],
    );
}

/// `--ctx` resolves as llama.cpp's `-c`: unset is 4096 or the training context when that is smaller
/// (the trained demo model has 256), 0 is the training context, and more than it is refused in one
/// line that names it.
#[test]
fn ctx_defaults_to_at_most_the_training_context() {
    let m = ingot_testdata::golden_model("trained-rust-std");
    let base = [
        "run",
        "-m",
        s(&m),
        "-p",
        "fn",
        "-n",
        "2",
        "--backend",
        "cpu",
    ];
    let run = |ctx: &[&str]| {
        let args = [&base[..], &["--temp", "0", "-v"], ctx].concat();
        let out = ingot(&args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {err}");
        err
    };
    assert!(run(&[]).contains("ctx 256,"), "unset --ctx");
    assert!(run(&["-c", "0"]).contains("ctx 256,"), "-c 0");
    assert!(run(&["-c", "100"]).contains("ctx 100,"), "-c 100");
    refused(
        &[&base[..], &["-c", "257"]].concat(),
        &["--ctx", "257", "training context 256"],
    );
}
