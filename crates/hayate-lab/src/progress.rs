//! Progress bars of long runs, on stderr (hidden when stderr is not a terminal).

/// A progress bar on stderr counting `total` items (hidden when stderr is not a terminal).
pub fn progress_bar(total: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg:<28} [{bar:30}] {human_pos}/{human_len} {per_sec} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// A progress bar on stderr over a timed run of `seconds`.
pub fn timed_bar(seconds: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(seconds.max(1));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:<40} [{bar:30}] {pos}/{len} s")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// A spinner on stderr for a step of unknown length (hidden when stderr is not a terminal).
pub fn spinner(what: &str) -> indicatif::ProgressBar {
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_message(what.to_string());
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    spinner
}
