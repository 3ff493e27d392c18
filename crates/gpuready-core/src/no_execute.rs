//! The `NoExecute` budget: how many of a profile's nodes, and of its devices,
//! may be under an escalation to `NoExecute` at once
//! (`escalation.maxNoExecutePercent`). Not a rate over a window, which slow
//! waves outrun (issue 49: 160 of 200 nodes went `NoExecute` in two waves the
//! safety brake never saw), but a level: an escalation is granted only while
//! fewer than the limit hold one, and never while the profile's safety brake
//! is engaged — except that what is `NoExecute` already stays so (the pods it
//! evicted are gone; lifting it would only let new ones land on a bad GPU).
//!
//! Plain data, decided under the node book's lock: a reconcile asks once per
//! pass ([`Budget::ask`]), which first gives back the node's earlier grants,
//! so the book always holds exactly what the last pass of each node decided.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

/// Why an escalation waits with the taint's own effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HeldBy {
    /// The profile's safety brake is engaged.
    Brake,
    /// The profile's share under `NoExecute` is at its limit.
    Budget,
}

/// One escalation held back, and the budget it met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    pub by: HeldBy,
    /// Nodes (or devices) of the profile under `NoExecute` now.
    pub under: usize,
    /// The most that may be.
    pub limit: usize,
    /// Of how many the profile governs.
    pub of: usize,
}

impl Hold {
    /// In words, for the node's message and `check`: `what` is "nodes" or
    /// "devices".
    pub fn describe(&self, what: &str) -> String {
        match self.by {
            HeldBy::Brake => {
                "escalation to NoExecute held: the profile's safety brake is engaged".to_owned()
            }
            HeldBy::Budget => format!(
                "escalation to NoExecute held: {} of {} {what} are NoExecute already, the most escalation.maxNoExecutePercent allows ({})",
                self.under, self.of, self.limit
            ),
        }
    }
}

/// What one node asks of its profile's budget in one pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ask {
    /// The node's taint is due to escalate (its dry run is over).
    pub node_due: bool,
    /// gpuready's taint on the node is `NoExecute` already.
    pub node_now: bool,
    /// Devices whose escalation rule is due to turn `NoExecute`.
    pub devices_due: BTreeSet<String>,
    /// Devices whose escalation rule is `NoExecute` already.
    pub devices_now: BTreeSet<String>,
    /// Devices of the node (the denominator of the device share).
    pub devices: usize,
    /// `escalation.maxNoExecutePercent`.
    pub percent: u8,
}

/// The escalations of one pass that must wait; everything else asked is
/// granted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    pub node_held: Option<Hold>,
    pub devices_held: BTreeMap<String, Hold>,
}

impl Grant {
    pub fn holds_anything(&self) -> bool {
        self.node_held.is_some() || !self.devices_held.is_empty()
    }
}

/// The most of `of` that `percent` allows: at least one while above 0, so a
/// small pool can still escalate its one bad node.
pub fn limit(percent: u8, of: usize) -> usize {
    if percent == 0 {
        return 0;
    }
    (of * usize::from(percent.min(100)) / 100).max(1)
}

/// A profile's view of its budget, for status and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetView {
    pub nodes: usize,
    pub node_limit: usize,
    pub nodes_held: usize,
    pub devices: usize,
    pub device_limit: usize,
    pub devices_held: usize,
}

/// One profile's budget (see the module comment).
#[derive(Clone, Debug, Default)]
pub struct Budget {
    nodes: BTreeSet<String>,
    devices: BTreeMap<String, BTreeSet<String>>,
    device_count: usize,
    /// Devices per node, as last asked, and their sum.
    gpus: BTreeMap<String, usize>,
    gpu_total: usize,
    /// Nodes with an escalation held, and how many each holds.
    waiting: BTreeMap<String, (bool, usize)>,
    percent: u8,
    matched: usize,
}

impl Budget {
    /// Decides one pass of `node`: gives back its earlier grants, then grants
    /// what stays `NoExecute` and what fits. `matched` is the profile's node
    /// count, `engaged` its brake. Returns the holds and whether room opened
    /// for nodes that wait ([`Budget::waiting`]).
    pub fn ask(&mut self, node: &str, ask: &Ask, matched: usize, engaged: bool) -> (Grant, bool) {
        let (had_node, had_devices) = self.give_back(node);
        let limits_before = self.limits();
        self.percent = ask.percent;
        self.matched = matched;
        self.gpus.insert(node.to_owned(), ask.devices);
        self.gpu_total += ask.devices;
        let (node_limit, device_limit) = self.limits();
        let node_rose = node_limit > limits_before.0;
        let devices_rose = device_limit > limits_before.1;
        let mut grant = Grant::default();
        if ask.node_due {
            match self.decide(ask.node_now, engaged, self.nodes.len(), node_limit, matched) {
                None => {
                    self.nodes.insert(node.to_owned());
                }
                Some(h) => grant.node_held = Some(h),
            }
        }
        let mut mine = BTreeSet::new();
        for d in &ask.devices_due {
            let now = ask.devices_now.contains(d);
            let used = self.device_count + mine.len();
            match self.decide(now, engaged, used, device_limit, self.gpu_total) {
                None => {
                    mine.insert(d.clone());
                }
                Some(h) => {
                    grant.devices_held.insert(d.clone(), h);
                }
            }
        }
        self.device_count += mine.len();
        let kept_node = self.nodes.contains(node);
        let kept_devices = mine.len();
        if !mine.is_empty() {
            self.devices.insert(node.to_owned(), mine);
        }
        if grant.holds_anything() {
            let waiting = (grant.node_held.is_some(), grant.devices_held.len());
            self.waiting.insert(node.to_owned(), waiting);
        } else {
            self.waiting.remove(node);
        }
        let freed = (had_node && !kept_node) || kept_devices < had_devices;
        let opened = freed || node_rose || devices_rose;
        (grant, opened && self.has_waiting_besides(node))
    }

    /// The node and device limits now.
    fn limits(&self) -> (usize, usize) {
        (
            limit(self.percent, self.matched.max(1)),
            limit(self.percent, self.gpu_total.max(1)),
        )
    }

    /// Granted when it is `NoExecute` already; else held by an engaged brake
    /// or a full budget.
    fn decide(
        &self,
        now: bool,
        engaged: bool,
        used: usize,
        limit: usize,
        of: usize,
    ) -> Option<Hold> {
        let hold = |by| Hold {
            by,
            under: used,
            limit,
            of,
        };
        if now {
            None
        } else if engaged {
            Some(hold(HeldBy::Brake))
        } else if used >= limit {
            Some(hold(HeldBy::Budget))
        } else {
            None
        }
    }

    /// Drops the node's grants; returns whether it held the node's and how
    /// many devices.
    fn give_back(&mut self, node: &str) -> (bool, usize) {
        let had_node = self.nodes.remove(node);
        let had_devices = self.devices.remove(node).map_or(0, |d| d.len());
        self.device_count -= had_devices;
        if let Some(n) = self.gpus.remove(node) {
            self.gpu_total -= n;
        }
        (had_node, had_devices)
    }

    /// The node left (deleted, or no longer this profile's). Returns whether
    /// room opened for nodes that wait.
    pub fn forget(&mut self, node: &str) -> bool {
        let (had_node, had_devices) = self.give_back(node);
        self.waiting.remove(node);
        (had_node || had_devices > 0) && !self.waiting.is_empty()
    }

    /// The profile's node count changed (the status task's tally): whether
    /// the limit rose with nodes waiting.
    pub fn matched(&mut self, matched: usize) -> bool {
        let before = self.limits().0;
        self.matched = matched;
        self.limits().0 > before && !self.waiting.is_empty()
    }

    /// The nodes with an escalation held, to ask again once room opens.
    pub fn waiting(&self) -> Vec<String> {
        self.waiting.keys().cloned().collect()
    }

    fn has_waiting_besides(&self, node: &str) -> bool {
        self.waiting.keys().any(|n| n != node)
    }

    pub fn view(&self) -> BudgetView {
        let (node_limit, device_limit) = self.limits();
        BudgetView {
            nodes: self.nodes.len(),
            node_limit,
            nodes_held: self.waiting.values().filter(|(n, _)| *n).count(),
            devices: self.device_count,
            device_limit,
            devices_held: self.waiting.values().map(|(_, d)| d).sum(),
        }
    }
}

#[cfg(test)]
mod tests;
