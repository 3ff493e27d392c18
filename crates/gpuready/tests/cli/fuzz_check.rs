//! Property test of the offline `gpuready check`: random mutations of the shipped
//! example dumps and profiles (fixed seed, so a failure reproduces) must never
//! panic (exit 101), never exit outside {0, 1, 2}, finish within a time bound and
//! stay within a memory bound (`ulimit -v`).
//!
//! The normal test run tries `GPUREADY_FUZZ_CASES` inputs (default 150); set it
//! higher for a longer budget, and `GPUREADY_FUZZ_SEED` for another sequence:
//! `GPUREADY_FUZZ_CASES=5000 cargo test -p gpuready --test cli fuzz_check:: -- --nocapture`.
//! The figures printed at the end go into docs/hardening.md; `GPUREADY_FUZZ_BIN`
//! runs another build (a baseline) through the same inputs.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::rng::Rng;
use support::*;

const EXAMPLES: [&str; 3] = ["pascal-maxwell", "rtx3090-rtx4070tis", "talos-rtx3050"];
/// Per run. Generous for a debug binary on a loaded 2-core machine; a hang is
/// what this catches (the quadratic YAML case took minutes).
const TIME_LIMIT: Duration = Duration::from_secs(20);
/// Virtual memory per run, in KiB.
const MEMORY_LIMIT_KIB: u64 = 2 * 1024 * 1024;

/// Values that broke, or could break, parsing and judging.
fn nasty_values(rng: &mut Rng) -> Value {
    let deep = (0..rng.below(400)).fold(Value::Null, |v, _| Value::Array(vec![v]));
    let options: Vec<Value> = vec![
        "".into(),
        "é".into(),
        "aé1".into(),
        "\u{0}\n\u{1b}[2J".into(),
        "99999999999.1".into(),
        "570.26".into(),
        "-1".into(),
        ".nan".into(),
        "NVIDIA-[RTX".into(),
        "x".repeat(70_000).into(),
        Value::from(4_294_967_296u64),
        Value::from(-1),
        Value::from(1e300),
        Value::from(0),
        Value::Bool(true),
        Value::Null,
        Value::Object(Default::default()),
        Value::Array(vec![]),
        deep,
    ];
    rng.pick(&options).clone()
}

/// Paths to every value in the tree.
fn paths(v: &Value, here: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                here.push(k.clone());
                paths(c, here, out);
                here.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                here.push(i.to_string());
                paths(c, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, seg| match v {
        Value::Object(m) => m.get_mut(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    })
}

/// One structural mutation of a parsed document.
fn mutate_value(v: &mut Value, rng: &mut Rng) {
    let mut all = Vec::new();
    paths(v, &mut Vec::new(), &mut all);
    let path = rng.pick(&all).clone();
    match rng.below(4) {
        0 | 1 => {
            let new = nasty_values(rng);
            if let Some(slot) = at(v, &path) {
                *slot = new;
            }
        }
        2 => {
            // Add an odd key to a map, most often to a label map.
            let labels: Vec<&Vec<String>> = all
                .iter()
                .filter(|p| p.last().is_some_and(|l| l == "labels"))
                .collect();
            let path = if !labels.is_empty() && rng.below(2) == 0 {
                (*rng.pick(&labels)).clone()
            } else {
                path
            };
            if let Some(Value::Object(m)) = at(v, &path) {
                let keys = [
                    "feature.node.kubernetes.io/pci-aé1_10de.present",
                    "feature.node.kubernetes.io/pci-0300_10de.present",
                    "nvidia.com/gfd.timestamp",
                    "<<",
                    "unknownField",
                ];
                let value = nasty_values(rng);
                m.insert((*rng.pick(&keys)).to_owned(), value);
            }
        }
        _ => {
            // Remove a key.
            if let Some((last, parent)) = path.split_last()
                && let Some(Value::Object(m)) = at(v, parent)
            {
                m.remove(last);
            }
        }
    }
}

/// One byte-level mutation of the file text.
fn mutate_bytes(bytes: &mut Vec<u8>, rng: &mut Rng) {
    let pos = rng.below(bytes.len() + 1);
    let inserts: [&[u8]; 9] = [
        b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        b"{",
        b".nan",
        b"<<: *a\n",
        "\u{feff}".as_bytes(),
        &[0xC3, 0x28],
        b"\n---\n",
        b"\t",
        "é".as_bytes(),
    ];
    match rng.below(4) {
        0 => bytes.truncate(pos),
        1 => {
            let end = (pos + rng.below(200)).min(bytes.len());
            let span = bytes[pos..end].to_vec();
            bytes.splice(pos..pos, span);
        }
        2 if rng.below(8) == 0 => {
            let flood = b"[".repeat(20_000 + rng.below(140_000));
            bytes.splice(pos..pos, flood);
        }
        _ => {
            let ins = rng.pick(&inserts);
            bytes.splice(pos..pos, ins.iter().copied());
        }
    }
}

#[derive(Debug, Default)]
struct Tally {
    tried: usize,
    exits: [usize; 3],
    panics: Vec<String>,
    wrong_exits: Vec<String>,
    hangs: Vec<String>,
    slowest: Duration,
}

/// The binary under test: this build, or `GPUREADY_FUZZ_BIN` (an older build, to
/// measure a baseline in the same run).
fn binary() -> PathBuf {
    std::env::var_os("GPUREADY_FUZZ_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gpuready")))
}

fn run_case(dir: &Path, nodes: &Path, profiles: &Path, output: &str) -> (Option<i32>, Duration) {
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_LIMIT_KIB}; exec \"$0\" \"$@\""))
        .arg(binary())
        .args(["check", "--now", DUMPED_AT, "-o", output, "--nodes"])
        .arg(nodes)
        .arg("--profiles")
        .arg(profiles)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn gpuready");
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return (status.code(), started.elapsed());
        }
        if started.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return (None, started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn mutated_examples_never_panic_hang_or_exit_oddly() {
    let cases: usize = std::env::var("GPUREADY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    let seed: u64 = std::env::var("GPUREADY_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6770_7572_6561_6479);
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut tally = Tally::default();
    for case in 0..cases {
        let example = *rng.pick(&EXAMPLES);
        let base = repo_root().join("deploy/examples").join(example);
        let nodes_text = std::fs::read(base.join("nodes.json")).expect("nodes");
        let profiles_text = std::fs::read(base.join("profiles.yaml")).expect("profiles");
        let mutate_nodes = rng.below(2) == 0;
        let original = if mutate_nodes {
            &nodes_text
        } else {
            &profiles_text
        };
        let mut bytes = original.clone();
        let as_yaml = rng.below(2) == 0;
        if rng.below(3) == 0 {
            if as_yaml {
                // The YAML form of the same objects, so byte mutations reach the
                // YAML reader too (the examples' node dumps are JSON).
                let text = String::from_utf8_lossy(original);
                let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
                    .filter_map(|d| serde::Deserialize::deserialize(d).ok())
                    .collect();
                bytes = docs
                    .iter()
                    .map(|d| serde_yaml_ng::to_string(d).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("---\n")
                    .into_bytes();
            }
            mutate_bytes(&mut bytes, &mut rng);
        } else {
            // Parse (profiles are YAML), mutate, write as JSON or YAML.
            let text = String::from_utf8_lossy(original);
            let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
                .filter_map(|d| serde::Deserialize::deserialize(d).ok())
                .filter(|v: &Value| !v.is_null())
                .collect();
            let mut docs = if docs.is_empty() {
                vec![Value::Null]
            } else {
                docs
            };
            for _ in 0..=rng.below(3) {
                let i = rng.below(docs.len());
                mutate_value(&mut docs[i], &mut rng);
            }
            bytes = if as_yaml || docs.len() > 1 {
                docs.iter()
                    .map(|d| serde_yaml_ng::to_string(d).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("---\n")
                    .into_bytes()
            } else {
                serde_json::to_vec(&docs[0]).unwrap_or_default()
            };
        }
        let (nodes, profiles) = (dir.path().join("nodes.in"), dir.path().join("profiles.in"));
        let (n, p) = if mutate_nodes {
            (&bytes, &profiles_text)
        } else {
            (&nodes_text, &bytes)
        };
        std::fs::write(&nodes, n).expect("write");
        std::fs::write(&profiles, p).expect("write");
        let output = *rng.pick(&["table", "json", "yaml"]);
        let (code, took) = run_case(dir.path(), &nodes, &profiles, output);
        tally.tried += 1;
        tally.slowest = tally.slowest.max(took);
        let what = format!(
            "case {case} (seed {seed}): {} of {example} mutated, -o {output}",
            if mutate_nodes { "nodes" } else { "profiles" }
        );
        match code {
            Some(c @ 0..=2) => tally.exits[usize::try_from(c).unwrap_or(0)] += 1,
            Some(101) => {
                tally.panics.push(what.clone());
                keep_failure(&what, n, p);
            }
            Some(c) => {
                tally.wrong_exits.push(format!("{what}: exit {c}"));
                keep_failure(&what, n, p);
            }
            None => {
                tally.hangs.push(what.clone());
                keep_failure(&what, n, p);
            }
        }
    }
    println!(
        "fuzz_check: {} inputs tried (seed {seed}); exits 0/1/2: {:?}; panics {}; wrong exits {}; hangs {}; slowest {:?}",
        tally.tried,
        tally.exits,
        tally.panics.len(),
        tally.wrong_exits.len(),
        tally.hangs.len(),
        tally.slowest
    );
    assert!(
        tally.panics.is_empty() && tally.wrong_exits.is_empty() && tally.hangs.is_empty(),
        "panics: {:?}\nwrong exits: {:?}\nhangs: {:?}",
        tally.panics,
        tally.wrong_exits,
        tally.hangs
    );
    assert!(
        tally.exits[2] > 0 && tally.exits[0] + tally.exits[1] > 0,
        "the mutations should produce both usable and unusable inputs: {:?}",
        tally.exits
    );
}

/// Keeps a failing input where a person can find it (target/fuzz-failures).
fn keep_failure(what: &str, nodes: &[u8], profiles: &[u8]) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let stem: String = what
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let _ = std::fs::write(dir.join(format!("{stem}.nodes")), nodes);
    let _ = std::fs::write(dir.join(format!("{stem}.profiles")), profiles);
}
