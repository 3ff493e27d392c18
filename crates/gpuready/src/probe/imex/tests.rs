//! Tests of `imex`, in their own file beside it.

use std::os::unix::fs::symlink;
use std::os::unix::net::UnixListener;

use super::*;

/// A host's `/`, as the chart mounts it: only `etc` in it.
fn host() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("temp dir");
    fs::create_dir_all(
        root.path()
            .join("etc/systemd/system/multi-user.target.wants"),
    )
    .expect("unit dir");
    root
}

fn write(root: &Path, host_path: &str, text: &str) {
    let path = under(root, host_path);
    fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    fs::write(path, text).expect("write");
}

/// What the nvidia-imex package leaves, and `systemctl enable`.
fn install_imex(root: &Path, config: &str) {
    write(root, IMEX_CONFIG_PATH, config);
    symlink(
        "/usr/lib/systemd/system/nvidia-imex.service",
        root.join("etc/systemd/system/multi-user.target.wants/nvidia-imex.service"),
    )
    .expect("enable");
}

#[test]
fn a_host_without_imex_reads_not_installed() {
    let root = host();
    let state = read(root.path());
    assert_eq!(state.config, ImexConfig::default());
    assert_eq!(state.socket, None);
    assert_eq!(state.unit.state, UnitState::NotEnabled);
    assert!(state.unit.wanted_by.is_empty());
    assert_eq!(state.unit.error, None);
}

#[test]
fn an_enabled_host_managed_service_with_its_socket() {
    let root = host();
    install_imex(
        root.path(),
        "# IMEX config\nSERVER_PORT=50000\nIMEX_CMD_ENABLED=0\n  IMEX_CMD_ENABLED = 1\n\
         #IMEX_CMD_UNIX_DOMAIN_PATH=/tmp/other.sock\nIMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock\n",
    );
    let socket = under(root.path(), "/etc/nvidia-imex/imex_ctrl.sock");
    let _listener = UnixListener::bind(&socket).expect("socket");
    let state = read(root.path());
    assert_eq!(
        state.config,
        ImexConfig {
            present: true,
            cmd_enabled: Some("1".into()),
            cmd_unix_domain_path: Some("/etc/nvidia-imex/imex_ctrl.sock".into()),
            error: None,
        }
    );
    assert_eq!(
        state.socket,
        Some(ImexSocket {
            path: "/etc/nvidia-imex/imex_ctrl.sock".into(),
            state: SocketState::Present,
        })
    );
    assert_eq!(state.unit.state, UnitState::Enabled);
    assert_eq!(state.unit.wanted_by, ["multi-user.target"]);
}

#[test]
fn the_socket_absent_not_a_socket_or_not_visible() {
    let root = host();
    let config = |path: &str| format!("IMEX_CMD_ENABLED=1\nIMEX_CMD_UNIX_DOMAIN_PATH={path}\n");
    install_imex(root.path(), &config("/etc/nvidia-imex/imex_ctrl.sock"));
    let state = |root: &Path| read(root).socket.expect("socket named").state;
    assert_eq!(state(root.path()), SocketState::Absent);
    write(root.path(), "/etc/nvidia-imex/imex_ctrl.sock", "");
    assert_eq!(state(root.path()), SocketState::NotASocket);
    // /run is not mounted: absent there would be a guess.
    write(
        root.path(),
        IMEX_CONFIG_PATH,
        &config("/run/nvidia-imex/ctrl.sock"),
    );
    assert_eq!(state(root.path()), SocketState::NotVisible);
    write(root.path(), IMEX_CONFIG_PATH, &config("imex_ctrl.sock"));
    assert_eq!(state(root.path()), SocketState::NotVisible);
    // Nothing outside the host root is looked at.
    write(
        root.path(),
        IMEX_CONFIG_PATH,
        &config("/etc/../../etc/nvidia-imex/imex_ctrl.sock"),
    );
    assert_eq!(state(root.path()), SocketState::NotVisible);
    // An empty value names no socket.
    write(root.path(), IMEX_CONFIG_PATH, &config(""));
    let read = read(root.path());
    assert_eq!(read.socket, None);
    assert_eq!(read.config.cmd_unix_domain_path, None);
    assert_eq!(read.config.cmd_enabled.as_deref(), Some("1"));
}

#[test]
fn masked_by_a_link_to_dev_null_or_an_empty_file() {
    let root = host();
    install_imex(root.path(), "IMEX_CMD_ENABLED=0\n");
    let unit = root.path().join("etc/systemd/system/nvidia-imex.service");
    symlink("/dev/null", &unit).expect("mask");
    let state = read(root.path());
    assert_eq!(state.unit.state, UnitState::Masked);
    // The wants link left behind does not start a masked unit.
    assert_eq!(state.unit.wanted_by, ["multi-user.target"]);
    assert_eq!(state.config.cmd_enabled.as_deref(), Some("0"));
    assert_eq!(state.socket, None);
    fs::remove_file(&unit).expect("unmask");
    fs::write(&unit, "").expect("empty unit");
    assert_eq!(read(root.path()).unit.state, UnitState::Masked);
    // A unit file of its own (an override of the package's) is no mask.
    fs::write(
        &unit,
        "[Service]\nExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg\n",
    )
    .expect("unit file");
    assert_eq!(read(root.path()).unit.state, UnitState::Enabled);
}

#[test]
fn disabled_installed_and_wanted_by_other_targets() {
    let root = host();
    write(root.path(), IMEX_CONFIG_PATH, "IMEX_CMD_ENABLED=1\n");
    let state = read(root.path());
    assert!(state.config.present);
    assert_eq!(state.unit.state, UnitState::NotEnabled);
    let wants = root
        .path()
        .join("etc/systemd/system/graphical.target.requires");
    fs::create_dir_all(&wants).expect("dir");
    symlink(
        "/usr/lib/systemd/system/nvidia-imex.service",
        wants.join(IMEX_UNIT),
    )
    .expect("link");
    let state = read(root.path());
    assert_eq!(state.unit.state, UnitState::Enabled);
    assert_eq!(state.unit.wanted_by, ["graphical.target"]);
}

#[test]
fn a_config_that_cannot_be_read_says_why() {
    let root = host();
    fs::create_dir_all(under(root.path(), IMEX_CONFIG_PATH)).expect("a directory there");
    let config = read(root.path()).config;
    assert!(config.present);
    assert_eq!(config.cmd_enabled, None);
    assert!(
        config
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("reading /etc/nvidia-imex/config.cfg: ")),
        "{config:?}"
    );
}

#[test]
fn a_config_linked_outside_the_host_etc_is_present_but_unread() {
    let root = host();
    let config = under(root.path(), IMEX_CONFIG_PATH);
    fs::create_dir_all(config.parent().expect("parent")).expect("dir");
    symlink("/opt/imex/config.cfg", &config).expect("link");
    let read = read(root.path()).config;
    assert!(read.present);
    assert!(
        read.error
            .as_deref()
            .is_some_and(|e| e.contains("a link to /opt/imex/config.cfg")),
        "{read:?}"
    );
}

#[test]
fn no_host_etc_or_no_systemd_is_unread_not_absent() {
    let empty = tempfile::tempdir().expect("temp dir");
    let state = read(empty.path());
    assert!(!state.config.present);
    assert!(
        state
            .config
            .error
            .as_deref()
            .is_some_and(|e| e.contains("not mounted")),
        "{state:?}"
    );
    assert_eq!(state.unit.state, UnitState::Unread);
    let no_systemd = tempfile::tempdir().expect("temp dir");
    fs::create_dir(no_systemd.path().join("etc")).expect("etc");
    let state = read(no_systemd.path());
    assert_eq!(state.config.error, None);
    assert_eq!(state.unit.state, UnitState::Unread);
    assert!(
        state
            .unit
            .error
            .as_deref()
            .is_some_and(|e| e.contains("/etc/systemd/system")),
        "{state:?}"
    );
}
