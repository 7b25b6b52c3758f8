//! What a page of measurements says about the run that produced it: the date, the
//! commit, the machine and its load, in the words `docs/benchmarks.md` and
//! `docs/chaos.md` use.

/// `YYYY-MM-DD HH:MM UTC` of a Unix time (the civil calendar, no time zones).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3_600,
        rem % 3_600 / 60
    )
}

fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The commit measured: `commit `abc123`` (with "with uncommitted changes" when the
/// tree differs from it), or "an unknown commit" outside a git checkout.
pub fn commit() -> String {
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "an unknown commit".into();
    };
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("commit `{head}` with uncommitted changes")
    } else {
        format!("commit `{head}`")
    }
}

/// The machine in one line: CPU model, cores, memory and kernel.
pub fn machine() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "an unknown CPU".to_owned(), |(_, v)| v.trim().to_owned());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let mem_gb = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let kernel = read("/proc/sys/kernel/osrelease");
    format!(
        "{cpu}, {cores} cores, {mem_gb:.0} GB, Linux {}",
        kernel.trim()
    )
}

/// The one-minute load average, as `/proc/loadavg` gives it ("?" where unreadable).
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}
