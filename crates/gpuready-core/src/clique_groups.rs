//! Groups of nodes named by a label (`fabric.groupByLabel`, a rack) and what
//! the other nodes of a node's group say about their NVLink clique: the input
//! of the Fabric layer's "every node of a group in one clique" rule, and the
//! rule itself. Pure: callers feed node labels in (the controller from its
//! node cache, `check` from the nodes it reads) and get back which nodes must
//! be judged again, so work follows what changed, not the fleet. Which nodes
//! of a group a profile governs is `group_peers`' business, above this file.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use gpuready_api::keys::nvidia;
use gpuready_api::validate::{is_owned_key, parse_clique};

/// The other nodes of one node's group: those governed by the same profile
/// that carry the same value of its `fabric.groupByLabel`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CliqueGroup {
    /// The label key and the value the nodes share.
    pub label: String,
    pub value: String,
    /// Each other node and its `nvidia.com/gpu.clique` label (`None`: none).
    pub peers: BTreeMap<String, Option<String>>,
}

/// How many nodes of a group (the node itself included) sit in each clique.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupTally {
    /// Clique → nodes, counting only cliques the profile accepts.
    pub counts: BTreeMap<String, usize>,
    /// Peers without a well-formed clique label: not ready on their own
    /// (`CliqueLabelMissing`/`Malformed`), so not counted.
    pub unlabelled: usize,
    /// Peers in a clique `fabric.cliques` does not list: not ready on their
    /// own (`UnexpectedClique`), so not counted.
    pub unexpected: usize,
}

/// Where the node's clique stands in its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Every node counted is in the node's clique.
    United,
    /// The node's clique holds more nodes than any other.
    Majority,
    /// Another clique holds more nodes than the node's.
    Minority { majority: String },
    /// No clique holds more nodes than every other: none can be called right.
    Tie,
}

impl GroupTally {
    /// Counts the node (in clique `own`) and its peers. `expected`: the
    /// profile's `fabric.cliques` (empty: any well-formed clique counts).
    pub fn of(own: &str, group: &CliqueGroup, expected: &[String]) -> GroupTally {
        let mut t = GroupTally::default();
        let accepted = |c: &str| expected.is_empty() || expected.iter().any(|e| e == c);
        for clique in std::iter::once(Some(own)).chain(group.peers.values().map(Option::as_deref)) {
            match clique {
                Some(c) if parse_clique(c).is_some() && accepted(c) => {
                    *t.counts.entry(c.to_owned()).or_default() += 1;
                }
                Some(c) if parse_clique(c).is_some() => t.unexpected += 1,
                _ => t.unlabelled += 1,
            }
        }
        t
    }

    /// Nodes counted.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }

    pub fn standing(&self, own: &str) -> Standing {
        let mine = self.counts.get(own).copied().unwrap_or(0);
        let best = self.counts.values().copied().max().unwrap_or(0);
        let at_best: Vec<&String> = self
            .counts
            .iter()
            .filter(|(_, n)| **n == best)
            .map(|(c, _)| c)
            .collect();
        match at_best.as_slice() {
            _ if self.counts.len() <= 1 => Standing::United,
            [one] if one.as_str() == own => Standing::Majority,
            [one] if mine < best => Standing::Minority {
                majority: (*one).clone(),
            },
            _ => Standing::Tie,
        }
    }
}

/// A label that changes on its own schedule and that no verdict of a peer
/// reads: GFD rewrites its timestamp on every pass.
fn is_volatile(key: &str) -> bool {
    key == nvidia::GFD_TIMESTAMP || is_owned_key(key)
}

/// Nodes per group, by label key and value, for the keys profiles group by;
/// and what each node's peers read of it, as a hash. Kept by the caller as
/// nodes come and go; each change answers with the nodes whose verdict may
/// have changed with it.
#[derive(Clone, Debug, Default)]
pub struct GroupIndex {
    keys: BTreeSet<String>,
    /// key → value → nodes.
    groups: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    nodes: BTreeMap<String, Member>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Member {
    /// (key, value) of every group the node is in.
    groups: Vec<(String, String)>,
    /// Hash of every label a peer's verdict may read: its clique, and any
    /// label a profile's selector may name (its membership of the profile).
    signature: u64,
}

impl GroupIndex {
    /// An empty index of these label keys.
    pub fn with_keys(keys: BTreeSet<String>) -> GroupIndex {
        GroupIndex {
            keys,
            ..GroupIndex::default()
        }
    }

    /// The label keys indexed.
    pub fn keys(&self) -> &BTreeSet<String> {
        &self.keys
    }

    /// Starts over with `keys` and every node (when the profiles' keys change).
    pub fn rebuild<'a, L>(
        &mut self,
        keys: BTreeSet<String>,
        nodes: impl IntoIterator<Item = (&'a str, L)>,
    ) where
        L: IntoIterator<Item = (&'a str, &'a str)>,
    {
        *self = GroupIndex::with_keys(keys);
        for (node, labels) in nodes {
            self.update(node, labels);
        }
    }

    /// The node with its labels as they are now (in key order, as a Node's
    /// map holds them). Returns the other nodes of every group it was or is
    /// in when what they read of it changed: they are judged again.
    pub fn update<'a>(
        &mut self,
        node: &str,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Vec<String> {
        let mut groups = Vec::new();
        let mut h = DefaultHasher::new();
        for (k, v) in labels {
            if self.keys.contains(k) {
                groups.push((k.to_owned(), v.to_owned()));
            }
            if !is_volatile(k) {
                (k, v).hash(&mut h);
            }
        }
        if groups.is_empty() {
            return self.remove(node);
        }
        let member = Member {
            groups,
            signature: h.finish(),
        };
        if self.nodes.get(node) == Some(&member) {
            return Vec::new();
        }
        let mut touched = self.remove(node);
        for (k, v) in &member.groups {
            let nodes = self
                .groups
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default();
            touched.extend(nodes.iter().cloned());
            nodes.insert(node.to_owned());
        }
        self.nodes.insert(node.to_owned(), member);
        touched.sort();
        touched.dedup();
        touched
    }

    /// The node is gone (deleted, or carries no group label any more):
    /// returns the other nodes of the groups it was in.
    pub fn remove(&mut self, node: &str) -> Vec<String> {
        let Some(member) = self.nodes.remove(node) else {
            return Vec::new();
        };
        let mut touched = Vec::new();
        for (k, v) in &member.groups {
            if let Some(values) = self.groups.get_mut(k) {
                if let Some(nodes) = values.get_mut(v) {
                    nodes.remove(node);
                    touched.extend(nodes.iter().cloned());
                    if nodes.is_empty() {
                        values.remove(v);
                    }
                }
                if values.is_empty() {
                    self.groups.remove(k);
                }
            }
        }
        touched.sort();
        touched.dedup();
        touched
    }

    /// Every node in some group.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// The nodes carrying `key=value`.
    pub fn members(&self, key: &str, value: &str) -> impl Iterator<Item = &str> {
        self.groups
            .get(key)
            .and_then(|v| v.get(value))
            .into_iter()
            .flatten()
            .map(String::as_str)
    }
}
