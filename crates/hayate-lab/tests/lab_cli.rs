//! `hayate-lab` itself: its help lists the lab's commands, and a command this build lacks says
//! how to get it instead of failing on syntax.

use crate::common;

use common::{lab, text};

#[test]
fn help_lists_the_lab_commands() {
    let output = lab(["--help"]);
    let (stdout, _) = text(&output);
    assert!(output.status.success());
    for command in [
        "device",
        "primitive",
        "replay",
        "report",
        "tpcc",
        "temp",
        "server",
        "bench",
    ] {
        assert!(stdout.contains(command), "help lacks {command}:\n{stdout}");
    }
    assert!(
        !stdout.contains("serve "),
        "the product's commands stay in `hayate`"
    );
}

#[cfg(not(feature = "peers"))]
#[test]
fn server_without_the_peers_feature_names_it() {
    let output = lab(["server", "--seconds", "1"]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--features peers") && stderr.starts_with("error: "),
        "{stderr}"
    );
}
