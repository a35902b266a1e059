//! The npm packages (npm/, scripts/npm-pack.sh): their versions are Cargo.toml's, and
//! install.md's recipe from a checkout packs them and installs the tarballs offline, whose
//! `promptgauge` runs the README's first command from a clean folder. (The Python wheel's
//! check needs a build of its own: .ci/check-wheel, which .ci/run runs after the tests,
//! builds it with install.md's `scripts/build-wheel.sh`; `cargo install --locked --path .`
//! is tried by .ci/run itself.) The release workflow builds each platform once.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::{STORE_VARIABLES, copy_dir, repo};

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_npm_package_has_cargo_tomls_version_and_names_its_platform() {
    let version = env!("CARGO_PKG_VERSION");
    let main = json(&repo().join("npm/promptgauge/package.json"));
    assert_eq!(main["name"], "promptgauge");
    assert_eq!(main["version"], version, "npm/promptgauge/package.json");
    assert_eq!(main["bin"]["promptgauge"], "bin/promptgauge.js");
    let optional = main["optionalDependencies"].as_object().unwrap();
    let mut platforms: Vec<String> = std::fs::read_dir(repo().join("npm/platforms"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    platforms.sort();
    let mut named: Vec<String> = optional
        .keys()
        .map(|k| k.trim_start_matches("@promptgauge/").to_string())
        .collect();
    named.sort();
    assert_eq!(
        named, platforms,
        "one optional dependency per npm/platforms/ folder"
    );
    assert!(platforms.len() >= 4, "{platforms:?}");
    for platform in &platforms {
        assert_eq!(
            optional[&format!("@promptgauge/{platform}")],
            version,
            "an exact version, so the launcher and its binary are one release"
        );
        let path = repo()
            .join("npm/platforms")
            .join(platform)
            .join("package.json");
        let p = json(&path);
        assert_eq!(
            p["name"],
            format!("@promptgauge/{platform}"),
            "{}",
            path.display()
        );
        assert_eq!(p["version"], version, "{}", path.display());
        assert!(p.get("bin").is_none(), "only the launcher is `promptgauge`");
        let mut parts = platform.split('-');
        assert_eq!(p["os"][0], parts.next().unwrap(), "{platform}");
        assert_eq!(p["cpu"][0], parts.next().unwrap(), "{platform}");
        let libc = match (parts.next(), platform.starts_with("linux")) {
            (Some("musl"), _) => Some("musl"),
            (None, true) => Some("glibc"),
            _ => None,
        };
        assert_eq!(p["libc"][0].as_str(), libc, "{platform}");
    }
}

/// npm and node, when this machine has them; in CI their absence is a failure.
fn npm() -> Option<()> {
    let works = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works("npm") && works("node") {
        return Some(());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no npm and node: .ci/run installs them"
    );
    println!("skipped: no npm and node on this machine");
    None
}

/// A command with no URL, key or store of this machine's.
fn clean(program: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir);
    for var in [
        "PROMPTGAUGE_BASE_URL",
        "OPENAI_BASE_URL",
        "LLM_BASE_URL",
        "OPENAI_API_KEY",
        "LLM_API_KEY",
    ]
    .into_iter()
    .chain(STORE_VARIABLES)
    {
        cmd.env_remove(var);
    }
    cmd
}

/// The npm recipe of install.md's "From a checkout", after `cargo build --release`: the
/// test build's binary stands in for the release one (a release build would cost CI
/// minutes, and packing does not look inside the binary).
const NPM_RECIPE: &str = "scripts/npm-pack.sh target/release/promptgauge target/npm && npm install -g ./target/npm/*.tgz";

#[test]
fn the_npm_packages_install_offline_as_install_md_says_and_run_the_readmes_first_command() {
    for doc in ["README.md", "docs/guide/install.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        assert!(
            text.contains(NPM_RECIPE),
            "{doc} no longer says {NPM_RECIPE}"
        );
    }
    if npm().is_none() {
        return;
    }
    // A clean folder laid out as a checkout after `cargo build --release`: the scripts and
    // packages, and the test build's binary, without its debug information where `strip`
    // is at hand (a fifth of the size to pack and unpack).
    let tmp = tempfile::tempdir().unwrap();
    let checkout = tmp.path().join("checkout");
    for dir in ["scripts", "npm"] {
        copy_dir(&repo().join(dir), &checkout.join(dir));
    }
    for file in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
        std::fs::copy(repo().join(file), checkout.join(file)).unwrap();
    }
    let binary = checkout.join("target/release/promptgauge");
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_promptgauge"), &binary).unwrap();
    let _ = Command::new("strip").arg(&binary).status();

    // The recipe as written, into a scratch global prefix, with no registry and an empty
    // cache.
    let global = tmp.path().join("global");
    let install = Command::new("bash")
        .current_dir(&checkout)
        .args(["-c", &format!("set -e; {NPM_RECIPE}")])
        .env("NPM_CONFIG_PREFIX", &global)
        .env("NPM_CONFIG_OFFLINE", "true")
        .env("NPM_CONFIG_AUDIT", "false")
        .env("NPM_CONFIG_FUND", "false")
        .env("NPM_CONFIG_CACHE", tmp.path().join("npm-cache"))
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "{NPM_RECIPE}: {}",
        String::from_utf8_lossy(&install.stderr)
    );
    let packed: Vec<_> = std::fs::read_dir(checkout.join("target/npm"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        packed.len(),
        2,
        "the launcher and this platform's: {packed:?}"
    );

    // The README's first command, from a clean folder, through the launcher npm linked.
    let installed = global.join("bin/promptgauge");
    let work = tmp.path().join("work");
    copy_dir(&repo().join("cases"), &work.join("cases"));
    copy_dir(&repo().join("prompts"), &work.join("prompts"));
    std::fs::copy(
        repo().join("promptgauge.yaml"),
        work.join("promptgauge.yaml"),
    )
    .unwrap();
    let run = clean(&installed, &work)
        .args(["run", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let reports: Vec<_> = std::fs::read_dir(work.join("reports"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("summary.json").is_file())
        .collect();
    assert_eq!(reports.len(), 1, "one run folder with its summary");

    // `npx` finds the global install too, and the binary's exit code comes through the
    // launcher.
    let npx = Command::new("npx")
        .current_dir(tmp.path())
        .args(["--offline", "promptgauge", "check", "missing.yaml"])
        .env("NPM_CONFIG_PREFIX", &global)
        .env("NPM_CONFIG_CACHE", tmp.path().join("npm-cache"))
        .output()
        .unwrap();
    assert_eq!(
        npx.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&npx.stderr)
    );
    assert!(String::from_utf8_lossy(&npx.stderr).contains("missing.yaml"));
}

#[test]
fn the_release_builds_tries_and_sums_every_package() {
    let text = std::fs::read_to_string(repo().join(".github/workflows/release.yml")).unwrap();
    let release: Value = serde_saphyr::from_str(&text).unwrap();
    let jobs = &release["jobs"];
    let steps = |job: &str| -> String {
        jobs[job]["steps"]
            .as_array()
            .unwrap_or_else(|| panic!("a job `{job}`"))
            .iter()
            .filter_map(|s| s["run"].as_str())
            .collect()
    };
    // Each kind of package is installed from a clean folder and run before it is attached.
    for job in ["archives", "wheels", "npm"] {
        assert!(
            steps(job).contains(".ci/first-run"),
            "{job} tries what it built"
        );
    }
    // Each platform is compiled for release once, by its wheel: no other job builds a
    // release binary, and each archive carries the binary of a wheel the workflow builds.
    let compiles = |job: &Value| {
        let steps = job["steps"].as_array().unwrap();
        steps.iter().any(|s| {
            s["run"].as_str().is_some_and(|r| {
                r.contains("cargo build --release")
                    || r.contains("cargo install")
                    || r.contains("maturin build")
            }) || (s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("PyO3/maturin-action"))
                && s["with"]["command"] == "build")
        })
    };
    for (name, job) in jobs.as_object().unwrap() {
        assert_eq!(
            compiles(job),
            name == "wheels",
            "job {name}: only the wheels compile a release"
        );
    }
    let archives = jobs["archives"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap();
    assert!(steps("archives").contains(".data/scripts/promptgauge"));
    assert!(
        jobs["archives"]["needs"] == "wheels",
        "the archives are packed from the wheels"
    );
    for archive in archives {
        let wheel = archive["wheel"].as_str().unwrap();
        let target = archive["target"].as_str().unwrap();
        let built = jobs["wheels"]["strategy"]["matrix"]["include"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == wheel)
            .unwrap_or_else(|| panic!("the archive of {target} takes no wheel built here"));
        assert_eq!(built["target"], target, "{target}'s archive holds {wheel}");
        assert_eq!(
            built["os"], archive["os"],
            "{target} is tried where it runs"
        );
    }
    assert_eq!(archives.len(), 4, "Linux and macOS, x86_64 and arm64");
    // A wheel for each platform an npm package is made from.
    let wheels: Vec<String> = jobs["wheels"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_string())
        .collect();
    for name in [
        "manylinux-x86_64",
        "manylinux-aarch64",
        "musllinux-x86_64",
        "musllinux-aarch64",
        "macos-arm64",
        "macos-x86_64",
    ] {
        assert!(
            wheels.iter().any(|w| w == name),
            "no {name} wheel: {wheels:?}"
        );
    }
    // Every npm/platforms/ package is packed.
    let pack = steps("npm");
    for entry in std::fs::read_dir(repo().join("npm/platforms")).unwrap() {
        let platform = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            pack.lines()
                .any(|l| l.trim().starts_with(&format!("pack {platform} "))),
            "the release packs no @promptgauge/{platform}"
        );
    }
    // Everything attached is summed, the schemas among it.
    assert!(steps("checksums").contains("sha256sum"));
    let attached = jobs["publish"]["steps"][1]["with"]["files"]
        .as_str()
        .unwrap();
    for file in [
        "SHA256SUMS",
        "*.whl",
        "*.tgz",
        "*.schema.json",
        ".tar.gz.sha256",
    ] {
        assert!(attached.contains(file), "{file} is not attached");
    }
}

/// The npm launcher passes on every signal sent to it alone and exits as the binary did
/// (issue 50, item 26): a SIGINT is not swallowed, a SIGQUIT leaves no orphan. The binary
/// here is a script that says which signal it got and exits as promptgauge would.
#[cfg(unix)]
#[test]
fn the_npm_launcher_passes_on_every_signal_and_exits_as_the_binary_did() {
    use std::os::unix::process::CommandExt;
    if npm().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let modules = tmp.path().join("node_modules");
    let launcher = modules.join("promptgauge/bin/promptgauge.js");
    std::fs::create_dir_all(launcher.parent().unwrap()).unwrap();
    std::fs::copy(repo().join("npm/promptgauge/bin/promptgauge.js"), &launcher).unwrap();
    let platform = Command::new("node")
        .args(["-p", "process.platform + '-' + process.arch"])
        .output()
        .unwrap();
    let platform = String::from_utf8(platform.stdout)
        .unwrap()
        .trim()
        .to_string();
    let log = tmp.path().join("log");
    let script = format!(
        "#!/bin/sh\n\
         trap 'echo INT >> {log}; exit 130' INT\n\
         trap 'echo QUIT >> {log}; exit 131' QUIT\n\
         trap 'echo TERM >> {log}; exit 143' TERM\n\
         [ \"$1\" = exit ] && exit \"$2\"\n\
         echo ready >> {log}\n\
         i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n\
         echo ran-out >> {log}\n",
        log = log.display()
    );
    for name in [platform.clone(), format!("{platform}-musl")] {
        let bin = modules.join(format!("@promptgauge/{name}/bin/promptgauge"));
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::fs::write(&bin, &script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The binary's exit code comes through.
    let done = Command::new("node")
        .arg(&launcher)
        .args(["exit", "3"])
        .status()
        .unwrap();
    assert_eq!(done.code(), Some(3));
    for (signal, said, code) in [
        (libc::SIGINT, "INT", 130),
        (libc::SIGQUIT, "QUIT", 131),
        (libc::SIGTERM, "TERM", 143),
    ] {
        let _ = std::fs::remove_file(&log);
        // A process group of its own: the signal goes to the launcher alone, as `kill` or a
        // supervisor sends it.
        let mut child = Command::new("node")
            .arg(&launcher)
            .process_group(0)
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("ready")) {
            assert!(started.elapsed().as_secs() < 20, "the binary never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // SAFETY: the pid is the launcher's, still running (it waits for the binary).
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let status = child.wait().unwrap();
        let log = std::fs::read_to_string(&log).unwrap();
        assert_eq!(status.code(), Some(code), "{said}: {log}");
        assert!(
            log.contains(said) && !log.contains("ran-out"),
            "{said}: {log}"
        );
    }
}

/// The README's install section leads with what works from a checkout today, each line a
/// command CI runs, and keeps the registry lines for after the first release (issue 52).
#[test]
fn the_readme_leads_with_installs_that_work_today_and_ci_runs_each() {
    let read = |p: &str| std::fs::read_to_string(repo().join(p)).unwrap();
    let readme = read("README.md");
    assert_eq!(
        readme.matches("\n## Install\n").count(),
        1,
        "one Install section"
    );
    let section = readme.split("\n## Install\n").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap();
    let (today, later) = section
        .split_once("After the first release")
        .expect("the registry lines wait for the first release");
    let wheel = "scripts/build-wheel.sh && pip install target/wheels/promptgauge-*.whl";
    for line in ["cargo install --locked --path .", wheel, NPM_RECIPE] {
        assert!(today.contains(line), "the README leads without {line}");
    }
    for line in [
        "pip install promptgauge",
        "npm install -g promptgauge",
        "cargo install --locked --git",
    ] {
        assert!(
            !today.contains(line) && later.contains(line),
            "{line} belongs after the first release"
        );
    }
    assert!(read("docs/guide/install.md").contains(wheel));
    // CI runs each: the wheel's check builds it with the script, .ci/run installs with cargo.
    assert!(read(".ci/check-wheel").contains("scripts/build-wheel.sh --debug"));
    let ci = read(".ci/run");
    assert!(ci.contains("cargo install --locked") && ci.contains("--path ."));
    assert!(ci.contains(".ci/check-wheel"));
}
