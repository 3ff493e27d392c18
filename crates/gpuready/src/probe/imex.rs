//! The host's `nvidia-imex` service as its files show it, for the Fabric
//! layer's `fabric.imexMode`: the config (`/etc/nvidia-imex/config.cfg`), the
//! control socket it names, and the unit's links under `/etc/systemd/system`.
//! Read from the host's `/etc` mounted read-only under `--host-root` (the
//! chart's `probe.imex.enabled`). Files only: whether the daemon runs is not
//! visible from here (no host PID namespace, no systemd bus), so nothing
//! claims it.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use gpuready_api::probe::{
    IMEX_CONFIG_PATH, IMEX_UNIT, ImexConfig, ImexHost, ImexSocket, ImexUnit, SYSTEMD_UNIT_DIR,
    SocketState, UnitState,
};

/// The config file's keys the Fabric layer reads.
const CMD_ENABLED: &str = "IMEX_CMD_ENABLED";
const CMD_UNIX_DOMAIN_PATH: &str = "IMEX_CMD_UNIX_DOMAIN_PATH";

/// Reads the IMEX host state under `root`, where the host's `/` is seen (its
/// `/etc` at `root/etc`).
pub fn read(root: &Path) -> ImexHost {
    let etc = root.join("etc");
    if !etc.is_dir() {
        let why = format!(
            "{} is not a directory: the host's /etc is not mounted there (--host-root)",
            etc.display()
        );
        return ImexHost {
            config: ImexConfig {
                error: Some(why.clone()),
                ..ImexConfig::default()
            },
            socket: None,
            unit: ImexUnit {
                state: UnitState::Unread,
                error: Some(why),
                ..ImexUnit::default()
            },
        };
    }
    let config = read_config(&under(root, IMEX_CONFIG_PATH));
    let socket = config
        .cmd_unix_domain_path
        .as_deref()
        .map(|path| socket(root, path));
    ImexHost {
        config,
        socket,
        unit: read_unit(&under(root, SYSTEMD_UNIT_DIR)),
    }
}

/// An absolute host path seen under `root`.
fn under(root: &Path, host_path: &str) -> PathBuf {
    root.join(host_path.trim_start_matches('/'))
}

fn read_config(path: &Path) -> ImexConfig {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        // A link whose target the probe cannot see (an absolute link resolves
        // in the container, not on the host) is there but unread.
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return match fs::read_link(path) {
                Ok(target) => ImexConfig {
                    present: true,
                    error: Some(format!(
                        "{IMEX_CONFIG_PATH} is a link to {}, which the probe cannot follow (it sees only the host's /etc)",
                        target.display()
                    )),
                    ..ImexConfig::default()
                },
                Err(_) => ImexConfig::default(),
            };
        }
        Err(e) => {
            return ImexConfig {
                present: true,
                error: Some(format!("reading {IMEX_CONFIG_PATH}: {e}")),
                ..ImexConfig::default()
            };
        }
    };
    let (mut enabled, mut socket) = (None, None);
    // `KEY=VALUE` lines, `#` comments; a later assignment wins.
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            CMD_ENABLED => enabled = Some(value.to_owned()),
            CMD_UNIX_DOMAIN_PATH => socket = (!value.is_empty()).then(|| value.to_owned()),
            _ => {}
        }
    }
    ImexConfig {
        present: true,
        cmd_enabled: enabled,
        cmd_unix_domain_path: socket,
        error: None,
    }
}

/// The socket at a host path. Only what lies under a top-level directory of
/// the host that is mounted (the chart mounts `/etc`) can be seen: elsewhere,
/// absent would be a guess. A path that is not plainly absolute (`..`, `.`)
/// is not followed.
fn socket(root: &Path, host_path: &str) -> ImexSocket {
    let path = Path::new(host_path);
    let mut parts = path.components();
    let plain = parts.next() == Some(Component::RootDir)
        && parts.clone().all(|c| matches!(c, Component::Normal(_)));
    let state = match parts.next() {
        Some(Component::Normal(top)) if plain && root.join(top).is_dir() => {
            match fs::symlink_metadata(under(root, host_path)) {
                Ok(m) if m.file_type().is_socket() => SocketState::Present,
                Ok(_) => SocketState::NotASocket,
                Err(e) if e.kind() == ErrorKind::NotFound => SocketState::Absent,
                Err(_) => SocketState::NotVisible,
            }
        }
        _ => SocketState::NotVisible,
    };
    ImexSocket {
        path: host_path.to_owned(),
        state,
    }
}

/// The unit's links: masked (a link to `/dev/null`, or an empty unit file,
/// which systemd treats alike), enabled (a link in some target's `.wants/` or
/// `.requires/`), or neither.
fn read_unit(dir: &Path) -> ImexUnit {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            return ImexUnit {
                state: UnitState::Unread,
                wanted_by: Vec::new(),
                error: Some(format!("reading {SYSTEMD_UNIT_DIR}: {e}")),
            };
        }
    };
    let mut wanted_by = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Some(target) = name
            .strip_suffix(".wants")
            .or_else(|| name.strip_suffix(".requires"))
        else {
            continue;
        };
        if fs::symlink_metadata(entry.path().join(IMEX_UNIT)).is_ok() {
            wanted_by.push(target.to_owned());
        }
    }
    wanted_by.sort();
    wanted_by.dedup();
    let unit = dir.join(IMEX_UNIT);
    let masked = match fs::symlink_metadata(&unit) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::read_link(&unit).is_ok_and(|t| t == Path::new("/dev/null"))
        }
        Ok(m) => m.is_file() && m.len() == 0,
        Err(_) => false,
    };
    let state = if masked {
        UnitState::Masked
    } else if wanted_by.is_empty() {
        UnitState::NotEnabled
    } else {
        UnitState::Enabled
    };
    ImexUnit {
        state,
        wanted_by,
        error: None,
    }
}

#[cfg(test)]
mod tests;
