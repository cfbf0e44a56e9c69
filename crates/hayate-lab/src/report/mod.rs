//! `hayate-lab report`: one self-contained HTML page (inline CSS and SVG, no script, nothing
//! fetched) with every result of a results directory.
//!
//! Lifecycle:
//! 1. `load` reads every `*.json` of the directory: device and primitive results by their
//!    `kind`, transaction timelines by their shape; anything else is kept as a skipped file
//!    with the reason, never fatal. A directory with nothing usable is an error.
//! 2. Runs without a latency model get one (`model::fill_sweep`), against the device
//!    measurement of their file or else the newest `hayate-lab device` result.
//! 3. `render` writes the page: header (machines, devices, versions, emulation notice), then
//!    the device, the primitive sweeps (throughput, side by side, model, alpha, time split,
//!    tables), the timelines, and the files with their command lines.
//!
//! Submodules: `html` (escaping, numbers, tables, style), `svg` (the charts), `device`,
//! `primitive` and `timelines` (one section each).

mod device;
mod html;
mod primitive;
mod server;
mod svg;
mod timelines;
mod tpcc;

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::model;
use super::results::{
    self, DeviceResult, PrimitiveResults, PrimitiveRun, ResultFile, ServerResults, Timeline,
    TpccCrashResults, TpccResults,
};
use hayate::error::{CliError, CliResult, Context};
use html::{escape, format_unix_time};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Directory of results to report on: every `*.json` written by `hayate-lab device` and
    /// `hayate-lab primitive`, and the timelines their runs refer to. Other files are listed
    /// in the report as skipped.
    #[arg(long, value_name = "DIR", default_value = "lab-results")]
    pub results: PathBuf,

    /// The HTML file to write (replaced if it exists). Default: `<DIR>/report.html`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(args: &ReportArgs) -> CliResult<()> {
    let collection = load(&args.results)?;
    let page = render(&collection, &args.results);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.results.join("report.html"));
    std::fs::write(&out, &page).context(|| format!("cannot write {}", out.display()))?;
    println!(
        "report: {} device, {} primitive ({} runs), {} timeline results; {} skipped",
        collection.devices.len(),
        collection.primitives.len(),
        collection.runs().count(),
        collection.timelines.len(),
        collection.skipped.len()
    );
    for skipped in &collection.skipped {
        println!("  skipped {}: {}", skipped.file, skipped.reason);
    }
    println!(
        "wrote {} ({} KiB)",
        out.display(),
        page.len().div_ceil(1024)
    );
    Ok(())
}

/// One results file and its name in the directory.
pub struct Source<T> {
    pub file_name: String,
    pub file: ResultFile<T>,
}

pub struct Skipped {
    pub file: String,
    pub reason: String,
}

/// Everything read from a results directory, files in name (so time) order.
pub struct Collection {
    pub devices: Vec<Source<DeviceResult>>,
    pub primitives: Vec<Source<PrimitiveResults>>,
    pub tpcc: Vec<Source<TpccResults>>,
    pub tpcc_crashes: Vec<Source<TpccCrashResults>>,
    pub servers: Vec<Source<ServerResults>>,
    /// (file name, timeline).
    pub timelines: Vec<(String, Timeline)>,
    pub skipped: Vec<Skipped>,
}

/// One run with the file it came from.
#[derive(Clone, Copy)]
pub struct RunRef<'a> {
    pub source: &'a Source<PrimitiveResults>,
    pub run: &'a PrimitiveRun,
}

impl Collection {
    pub fn runs(&self) -> impl Iterator<Item = RunRef<'_>> {
        self.primitives.iter().flat_map(|source| {
            (source.file.results.runs.iter()).map(move |run| RunRef { source, run })
        })
    }

    /// The device measurement to compare a file's runs to: its own reference, else the
    /// newest device result of the same block device, else the newest device result.
    pub fn device_for<'a>(
        &'a self,
        source: &'a Source<PrimitiveResults>,
    ) -> Option<&'a DeviceResult> {
        let block_device = &source.file.device.block_device;
        let same_device = (self.devices.iter().rev())
            .find(|device| device.file.device.block_device == *block_device);
        (source.file.results.device_reference.as_ref()).or_else(|| {
            same_device
                .or(self.devices.last())
                .map(|device| &device.file.results)
        })
    }
}

/// Reads a results directory (step 1 and 2 of the module doc).
pub fn load(dir: &Path) -> CliResult<Collection> {
    let paths = results::list(dir)?;
    if paths.is_empty() {
        return Err(CliError::new(format!(
            "no results (*.json) in {}: run `hayate-lab device` or `hayate-lab primitive` with \
             --results {} first",
            dir.display(),
            dir.display()
        )));
    }
    let mut collection = Collection {
        devices: Vec::new(),
        primitives: Vec::new(),
        tpcc: Vec::new(),
        tpcc_crashes: Vec::new(),
        servers: Vec::new(),
        timelines: Vec::new(),
        skipped: Vec::new(),
    };
    for path in &paths {
        let file_name = path.file_name().map_or_else(
            || path.display().to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
        if let Err(reason) = load_one(&mut collection, path, &file_name) {
            collection.skipped.push(Skipped {
                file: file_name,
                reason: reason.to_string(),
            });
        }
    }
    note_missing_timelines(&mut collection);
    if collection.devices.is_empty()
        && collection.primitives.is_empty()
        && !tpcc::has_results(&collection)
        && !server::has_results(&collection)
    {
        let reasons: Vec<String> = (collection.skipped.iter())
            .map(|skipped| format!("{}: {}", skipped.file, skipped.reason))
            .collect();
        return Err(CliError::new(format!(
            "no device, primitive, TPC-C or server results in {} ({} JSON files):\n  {}",
            dir.display(),
            paths.len(),
            reasons.join("\n  ")
        )));
    }
    for index in 0..collection.primitives.len() {
        let runs = &collection.primitives[index].file.results.runs;
        if runs.iter().all(|run| run.model.is_some()) {
            continue;
        }
        let device = collection
            .device_for(&collection.primitives[index])
            .cloned();
        let runs = &mut collection.primitives[index].file.results.runs;
        model::fill_sweep(runs, device.as_ref());
    }
    Ok(collection)
}

fn load_one(collection: &mut Collection, path: &Path, file_name: &str) -> CliResult<()> {
    let text =
        std::fs::read_to_string(path).context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).context(|| "not valid JSON".to_string())?;
    let kind = value.get("kind").and_then(|kind| kind.as_str());
    match kind {
        Some("device") => collection.devices.push(Source {
            file_name: file_name.to_string(),
            file: serde_json::from_value(value).context(|| "not a device result".to_string())?,
        }),
        Some("primitive") => collection.primitives.push(Source {
            file_name: file_name.to_string(),
            file: serde_json::from_value(value).context(|| "not a primitive result".to_string())?,
        }),
        Some("tpcc") => collection.tpcc.push(Source {
            file_name: file_name.to_string(),
            file: serde_json::from_value(value).context(|| "not a TPC-C result".to_string())?,
        }),
        Some("tpcc-crash") => collection.tpcc_crashes.push(Source {
            file_name: file_name.to_string(),
            file: serde_json::from_value(value)
                .context(|| "not a TPC-C crash loop result".to_string())?,
        }),
        Some("server") => collection.servers.push(Source {
            file_name: file_name.to_string(),
            file: serde_json::from_value(value).context(|| "not a server result".to_string())?,
        }),
        Some(other) => {
            return Err(CliError::new(format!(
                "kind {other:?} is not one the report knows (device, primitive, tpcc, \
                 tpcc-crash, server)"
            )))
        }
        None if value.get("workers").is_some() => collection.timelines.push((
            file_name.to_string(),
            serde_json::from_value(value).context(|| "not a timeline".to_string())?,
        )),
        None => {
            return Err(CliError::new(
                "neither a lab results file (no \"kind\") nor a timeline",
            ))
        }
    }
    Ok(())
}

/// Lists the timeline files runs refer to that were not found or not readable.
fn note_missing_timelines(collection: &mut Collection) {
    let loaded: BTreeSet<&str> = (collection.timelines.iter())
        .map(|(name, _)| name.as_str())
        .collect();
    let skipped: BTreeSet<&str> = (collection.skipped.iter())
        .map(|skipped| skipped.file.as_str())
        .collect();
    let mut missing = Vec::new();
    for reference in collection.runs() {
        let Some(timeline) = &reference.run.timeline_file else {
            continue;
        };
        if !loaded.contains(timeline.as_str()) && !skipped.contains(timeline.as_str()) {
            missing.push(Skipped {
                file: timeline.clone(),
                reason: format!(
                    "timeline of a run in {} is not in the results directory",
                    reference.source.file_name
                ),
            });
        }
    }
    collection.skipped.extend(missing);
}

// ---------------------------------------------------------------------------------------------
// The page

/// The whole HTML page.
pub fn render(collection: &Collection, dir: &Path) -> String {
    let mut body = String::new();
    let mut toc: Vec<(&str, &str)> = Vec::new();
    if !collection.devices.is_empty() {
        toc.push(("device", "Device"));
        body.push_str(&device::section(collection));
    }
    if !collection.primitives.is_empty() {
        toc.push(("primitive", "Primitive workload"));
        body.push_str(&primitive::section(collection));
    }
    if tpcc::has_results(collection) {
        toc.push(("tpcc", "TPC-C"));
        body.push_str(&tpcc::section(collection));
    }
    if server::has_results(collection) {
        toc.push(("server", "Server"));
        body.push_str(&server::section(collection));
    }
    if !collection.timelines.is_empty() {
        toc.push(("timelines", "Timelines"));
        body.push_str(&timelines::section(collection));
    }
    toc.push(("files", "Files"));
    body.push_str(&files_section(collection));

    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Hayate lab report: {}</title><style>{}</style></head><body><main>",
        escape(&dir.display().to_string()),
        html::STYLE
    );
    out.push_str(&header(collection, dir));
    out.push_str("<nav class=\"toc\">");
    for (anchor, title) in toc {
        let _ = write!(out, "<a href=\"#{anchor}\">{title}</a>");
    }
    out.push_str("</nav>");
    out.push_str(&body);
    let _ = writeln!(
        out,
        "<footer>Generated by hayate {} <code>lab report</code> on {}.</footer>\
         </main></body></html>",
        escape(env!("CARGO_PKG_VERSION")),
        format_unix_time(results::unix_now())
    );
    out
}

/// "1 run", "2 runs".
fn counted(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// Distinct values in first-seen order.
fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = Vec::new();
    for value in values {
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    seen
}

fn header(collection: &Collection, dir: &Path) -> String {
    let envelopes = || {
        let devices = collection
            .devices
            .iter()
            .map(|source| envelope(&source.file));
        let primitives = (collection.primitives.iter()).map(|source| envelope(&source.file));
        let tpcc = (collection.tpcc.iter()).map(|source| envelope(&source.file));
        let crashes = (collection.tpcc_crashes.iter()).map(|source| envelope(&source.file));
        let servers = (collection.servers.iter()).map(|source| envelope(&source.file));
        devices
            .chain(primitives)
            .chain(tpcc)
            .chain(crashes)
            .chain(servers)
    };
    let machines = distinct(envelopes().map(|(machine, _, _)| machine));
    let devices = distinct(envelopes().map(|(_, device, _)| device));
    let versions = distinct(envelopes().map(|(_, _, version)| version));
    let commands = {
        let devices = (collection.devices.iter()).map(|source| &source.file.command_line);
        let primitives = (collection.primitives.iter()).map(|source| &source.file.command_line);
        let tpcc = (collection.tpcc.iter()).map(|source| &source.file.command_line);
        let crashes = (collection.tpcc_crashes.iter()).map(|source| &source.file.command_line);
        let servers = (collection.servers.iter()).map(|source| &source.file.command_line);
        distinct(
            devices
                .chain(primitives)
                .chain(tpcc)
                .chain(crashes)
                .chain(servers)
                .map(|arguments| shell_words(arguments)),
        )
    };
    let started = envelopes().count();
    let mut out = String::new();
    let _ = write!(
        out,
        "<h1>Hayate lab report</h1><p class=\"subtitle\">Results in <code>{}</code>: {} ({} \
         device, {} with {}, {}){}.</p><div class=\"cards\">",
        escape(&dir.display().to_string()),
        counted(started + collection.timelines.len(), "file"),
        collection.devices.len(),
        counted(collection.primitives.len(), "primitive"),
        counted(collection.runs().count(), "run"),
        counted(collection.timelines.len(), "timeline"),
        if collection.skipped.is_empty() {
            String::new()
        } else {
            format!(", {} skipped", collection.skipped.len())
        }
    );
    for (title, values) in [
        ("Machine", machines),
        ("Device", devices),
        ("Hayate version", versions),
    ] {
        let _ = write!(out, "<div class=\"card\"><h4>{title}</h4>");
        for value in values {
            let _ = write!(out, "<div>{}</div>", escape(&value));
        }
        out.push_str("</div>");
    }
    out.push_str("<div class=\"card wide\"><h4>Command lines</h4>");
    for command in commands {
        let _ = write!(out, "<div><code>{}</code></div>", escape(&command));
    }
    out.push_str("</div></div>");
    if collection.runs().any(|reference| reference.run.emulated) {
        out.push_str(
            "<div class=\"notice\"><strong>Some results are emulated.</strong> They ran on the \
             real device with every I/O made to take at least the latency of the device class \
             (low-latency SSD ≥ 10 µs, NAND SSD ≥ 100 µs, external/SAN ≥ 1 ms and at most \
             16,000 IOPS). They are marked <span class=\"badge emulated\">emulated</span> \
             everywhere: they show how the engine behaves on such a device, not a measurement \
             of one.</div>",
        );
    }
    out
}

/// (machine, device, version) of a results file, as text.
fn envelope<T>(file: &ResultFile<T>) -> (String, String, String) {
    let device = &file.device;
    let mut text = format!("{} ({})", device.block_device, device.file_system);
    if let Some(model) = &device.model {
        let _ = write!(text, ", {model}");
    }
    match device.rotational {
        Some(true) => text.push_str(", rotational"),
        Some(false) => text.push_str(", flash"),
        None => {}
    }
    let _ = write!(text, ", under {}", device.directory);
    (file.machine.to_string(), text, file.hayate_version.clone())
}

fn files_section(collection: &Collection) -> String {
    let mut rows = Vec::new();
    let described = (collection.devices.iter())
        .map(|source| (&source.file_name, "device", row_of(&source.file)))
        .chain(
            (collection.primitives.iter())
                .map(|source| (&source.file_name, "primitive", row_of(&source.file))),
        )
        .chain(
            (collection.tpcc.iter())
                .map(|source| (&source.file_name, "tpcc", row_of(&source.file))),
        )
        .chain(
            (collection.tpcc_crashes.iter())
                .map(|source| (&source.file_name, "tpcc-crash", row_of(&source.file))),
        )
        .chain(
            (collection.servers.iter())
                .map(|source| (&source.file_name, "server", row_of(&source.file))),
        );
    for (file_name, kind, (started, version, command)) in described {
        rows.push(vec![
            format!("<code>{}</code>", escape(file_name)),
            kind.to_string(),
            started,
            escape(&version),
            format!("<code>{}</code>", escape(&command)),
        ]);
    }
    for (file_name, timeline) in &collection.timelines {
        rows.push(vec![
            format!("<code>{}</code>", escape(file_name)),
            "timeline".to_string(),
            "-".to_string(),
            "-".to_string(),
            escape(&format!(
                "{} {} at {}% buffer, {}",
                timeline.engine, timeline.mode, timeline.buffer_percent, timeline.device_class
            )),
        ]);
    }
    let mut out = String::from("<h2 id=\"files\">Files and command lines</h2>");
    out.push_str(&html::table(
        &["file", "kind", "started", "hayate", "command line"],
        &rows,
        "text",
    ));
    if !collection.skipped.is_empty() {
        out.push_str("<h3>Skipped</h3><ul class=\"skipped\">");
        for skipped in &collection.skipped {
            let _ = write!(
                out,
                "<li><code>{}</code>: {}</li>",
                escape(&skipped.file),
                escape(&skipped.reason)
            );
        }
        out.push_str("</ul>");
    }
    out
}

/// (started, version, command line) of a results file.
fn row_of<T>(file: &ResultFile<T>) -> (String, String, String) {
    (
        format_unix_time(file.started_unix),
        file.hayate_version.clone(),
        shell_words(&file.command_line),
    )
}

/// A command line as it would be typed: arguments with spaces or shell characters quoted.
fn shell_words(arguments: &[String]) -> String {
    let plain =
        |character: char| character.is_ascii_alphanumeric() || "_./=:,@%+-".contains(character);
    let words: Vec<String> = (arguments.iter())
        .map(|argument| {
            if !argument.is_empty() && argument.chars().all(plain) {
                argument.clone()
            } else {
                format!("'{}'", argument.replace('\'', "'\\''"))
            }
        })
        .collect();
    words.join(" ")
}

#[cfg(test)]
mod tests;
