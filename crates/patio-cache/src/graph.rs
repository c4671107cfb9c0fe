//! The successor graph of the segment-grouping cache and the groups built from it.
//!
//! * **Recent popularity** (Amer & Long): every item remembers its `k` most recent
//!   successors (the items read right after it by the same stream); an edge
//!   `u → v` exists while `v` occurs at least `j` times among them. Several
//!   successors may qualify when `2·j ≤ k`.
//! * **Bounded memory**: at most `max_nodes` items are tracked; when full, the half
//!   seen longest ago is forgotten (with the edges into it). [`SuccessorGraph::memory_bytes`]
//!   reports what is held.
//! * **Groups** ([`SuccessorGraph::groups`]): the strongly connected components of the
//!   edges (Tarjan, iterative); a component larger than a segment is split along
//!   successor order (a depth-first walk from its earliest-seen item), and groups of
//!   fewer items than a segment are packed together (first fit, largest first) into
//!   shared segments. Single items with no cycle through them are not grouped.

use std::collections::HashMap;

/// An item: a file (its index in the cache's file table) and an aligned extent of it
/// (its index in units of the item size).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    pub file: u32,
    pub index: u64,
}

/// Parameters of recent popularity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Popularity {
    /// A successor is linked when seen at least `j` times …
    pub j: usize,
    /// … among an item's last `k` successors.
    pub k: usize,
    /// Items tracked at most.
    pub max_nodes: usize,
}

impl Default for Popularity {
    fn default() -> Self {
        Popularity {
            j: 2,
            k: 4,
            max_nodes: 1 << 20,
        }
    }
}

struct Node {
    /// The last `k` successors, oldest first.
    recent: Vec<Item>,
    /// Successors seen at least `j` times among `recent`, most recent first.
    links: Vec<Item>,
    /// When the item was first and last observed (observation counter).
    first_seen: u64,
    last_seen: u64,
}

/// The successor graph (see the module documentation).
pub struct SuccessorGraph {
    params: Popularity,
    nodes: HashMap<Item, Node>,
    clock: u64,
    /// Edges added or removed since [`SuccessorGraph::take_changes`] was last called.
    changes: u64,
}

impl SuccessorGraph {
    pub fn new(params: Popularity) -> Self {
        assert!(params.j >= 1 && params.k >= params.j && params.max_nodes >= 2);
        SuccessorGraph {
            params,
            nodes: HashMap::new(),
            clock: 0,
            changes: 0,
        }
    }

    pub fn params(&self) -> Popularity {
        self.params
    }

    fn node(&mut self, item: Item) -> &mut Node {
        let clock = self.clock;
        self.nodes.entry(item).or_insert_with(|| Node {
            recent: Vec::new(),
            links: Vec::new(),
            first_seen: clock,
            last_seen: clock,
        })
    }

    /// `next` was read right after `prev` by one stream (`prev` is `None` for a
    /// stream's first read). Reads of the same item in a row are not successions.
    pub fn observe(&mut self, prev: Option<Item>, next: Item) {
        self.clock += 1;
        if self.nodes.len() >= self.params.max_nodes && !self.nodes.contains_key(&next) {
            self.forget_oldest();
        }
        let clock = self.clock;
        self.node(next).last_seen = clock;
        let Some(prev) = prev.filter(|p| *p != next) else {
            return;
        };
        let (j, k) = (self.params.j, self.params.k);
        let node = self.node(prev);
        node.last_seen = clock;
        node.recent.push(next);
        if node.recent.len() > k {
            node.recent.remove(0);
        }
        let links = popular(&node.recent, j);
        if links != node.links {
            node.links = links;
            self.changes += 1;
        }
    }

    /// Forgets the half of the items seen longest ago, and the edges into them.
    fn forget_oldest(&mut self) {
        let mut seen: Vec<u64> = self.nodes.values().map(|n| n.last_seen).collect();
        let mid = seen.len() / 2;
        let (_, cut, _) = seen.select_nth_unstable(mid);
        let cut = *cut;
        self.nodes.retain(|_, n| n.last_seen > cut);
        let kept: std::collections::HashSet<Item> = self.nodes.keys().copied().collect();
        for n in self.nodes.values_mut() {
            n.recent.retain(|i| kept.contains(i));
            n.links.retain(|i| kept.contains(i));
        }
        self.changes += 1;
    }

    /// The linked successors of `item`, most recent first.
    pub fn links(&self, item: Item) -> &[Item] {
        self.nodes.get(&item).map_or(&[], |n| &n.links)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Edges added or removed since the last call (groups are rebuilt when non-zero).
    pub fn take_changes(&mut self) -> u64 {
        std::mem::take(&mut self.changes)
    }

    pub fn pending_changes(&self) -> u64 {
        self.changes
    }

    /// Bytes the graph holds (items, successor lists, table overhead), estimated
    /// from the allocated capacities.
    pub fn memory_bytes(&self) -> u64 {
        let item = std::mem::size_of::<Item>();
        let per_entry = std::mem::size_of::<(Item, Node)>() + 8;
        let lists: usize = self
            .nodes
            .values()
            .map(|n| (n.recent.capacity() + n.links.capacity()) * item)
            .sum();
        (self.nodes.capacity() * per_entry + lists) as u64
    }

    /// Drops every item of `file` (its data changed beyond recognition).
    pub fn forget_file(&mut self, file: u32) {
        self.nodes.retain(|i, _| i.file != file);
        for n in self.nodes.values_mut() {
            n.recent.retain(|i| i.file != file);
            n.links.retain(|i| i.file != file);
        }
        self.changes += 1;
    }

    /// The groups of the current edges, each at most `per_segment` items, in the
    /// order their items should be stored (see the module documentation). Every
    /// item is in at most one group.
    pub fn groups(&self, per_segment: usize) -> Vec<Vec<Item>> {
        assert!(per_segment >= 1);
        let mut whole = Vec::new();
        for comp in self.components() {
            if comp.len() < 2 {
                continue;
            }
            let ordered = self.walk(&comp);
            for chunk in ordered.chunks(per_segment) {
                whole.push(chunk.to_vec());
            }
        }
        pack(whole, per_segment)
    }

    /// Strongly connected components (Tarjan, iterative), items sorted in each.
    fn components(&self) -> Vec<Vec<Item>> {
        let mut items: Vec<Item> = self.nodes.keys().copied().collect();
        items.sort();
        let pos: HashMap<Item, usize> = items.iter().enumerate().map(|(i, x)| (*x, i)).collect();
        let succ: Vec<Vec<usize>> = items
            .iter()
            .map(|x| {
                self.nodes[x]
                    .links
                    .iter()
                    .filter_map(|y| pos.get(y).copied())
                    .collect()
            })
            .collect();
        tarjan(&succ)
            .into_iter()
            .map(|c| {
                let mut v: Vec<Item> = c.into_iter().map(|i| items[i]).collect();
                v.sort();
                v
            })
            .collect()
    }

    /// The items of one component in successor order: a depth-first walk along the
    /// edges inside the component from its earliest-seen item.
    fn walk(&self, comp: &[Item]) -> Vec<Item> {
        let inside: std::collections::HashSet<Item> = comp.iter().copied().collect();
        let start = *comp
            .iter()
            .min_by_key(|i| (self.nodes[*i].first_seen, **i))
            .expect("non-empty component");
        let mut seen = std::collections::HashSet::new();
        let mut order = Vec::with_capacity(comp.len());
        let mut stack = vec![start];
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            order.push(x);
            // The most recent link is walked first: push it last.
            for y in self.nodes[&x].links.iter().rev() {
                if inside.contains(y) && !seen.contains(y) {
                    stack.push(*y);
                }
            }
        }
        order
    }
}

/// Successors occurring at least `j` times in `recent`, most recent first.
fn popular(recent: &[Item], j: usize) -> Vec<Item> {
    let mut out: Vec<Item> = Vec::new();
    for x in recent.iter().rev() {
        if out.contains(x) {
            continue;
        }
        let n = recent.iter().filter(|y| *y == x).count();
        if n >= j {
            out.push(*x);
        }
    }
    out
}

/// Tarjan's strongly connected components over `succ` (node → successors), without
/// recursion. Components come out in reverse topological order.
pub(crate) fn tarjan(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const NONE: usize = usize::MAX;
    let n = succ.len();
    let mut index = vec![NONE; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        // (node, position in its successor list)
        let mut call = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut at)) = call.last_mut() {
            if let Some(&w) = succ[v].get(*at) {
                *at += 1;
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            call.pop();
            if let Some(&(u, _)) = call.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = stack.pop().expect("v is on the stack");
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(comp);
            }
        }
    }
    out
}

/// Packs groups of fewer than `per_segment` items into shared segments (first fit,
/// largest first); full groups stay alone. Order inside each group is kept.
fn pack(groups: Vec<Vec<Item>>, per_segment: usize) -> Vec<Vec<Item>> {
    let (mut out, mut small): (Vec<_>, Vec<_>) =
        groups.into_iter().partition(|g| g.len() >= per_segment);
    small.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    let mut bins: Vec<Vec<Item>> = Vec::new();
    for g in small {
        match bins.iter_mut().find(|b| b.len() + g.len() <= per_segment) {
            Some(b) => b.extend(g),
            None => bins.push(g),
        }
    }
    out.extend(bins);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn it(i: u64) -> Item {
        Item { file: 0, index: i }
    }

    /// Reference recent popularity: the last k successors kept as a plain list per
    /// item, links recomputed by counting.
    fn reference_links(seq: &[u64], j: usize, k: usize) -> HashMap<u64, Vec<u64>> {
        let mut recent: HashMap<u64, Vec<u64>> = HashMap::new();
        for w in seq.windows(2) {
            if w[0] == w[1] {
                continue;
            }
            let r = recent.entry(w[0]).or_default();
            r.push(w[1]);
            if r.len() > k {
                r.remove(0);
            }
        }
        recent
            .into_iter()
            .map(|(x, r)| {
                let mut links: Vec<u64> = r
                    .iter()
                    .copied()
                    .filter(|y| r.iter().filter(|z| *z == y).count() >= j)
                    .collect();
                links.sort();
                links.dedup();
                (x, links)
            })
            .collect()
    }

    /// Reference SCC: u and v are in one component iff each reaches the other.
    fn reaches(succ: &[Vec<usize>]) -> Vec<Vec<bool>> {
        let n = succ.len();
        let mut r = vec![vec![false; n]; n];
        for (s, row) in r.iter_mut().enumerate() {
            let mut stack = vec![s];
            row[s] = true;
            while let Some(x) = stack.pop() {
                for &y in &succ[x] {
                    if !row[y] {
                        row[y] = true;
                        stack.push(y);
                    }
                }
            }
        }
        r
    }

    #[test]
    fn a_repeated_loop_becomes_one_group_split_to_the_segment() {
        let mut g = SuccessorGraph::new(Popularity::default());
        let mut prev = None;
        for _ in 0..3 {
            for i in [5, 1, 9, 3, 7] {
                g.observe(prev, it(i));
                prev = Some(it(i));
            }
        }
        let groups = g.groups(3);
        assert_eq!(groups.len(), 2);
        let order: Vec<u64> = groups.iter().flatten().map(|i| i.index).collect();
        assert_eq!(order, vec![5, 1, 9, 3, 7], "stored in successor order");
        // A forward-only stream seen once forms no group.
        let mut h = SuccessorGraph::new(Popularity::default());
        let mut prev = None;
        for i in 0..10 {
            h.observe(prev, it(i));
            prev = Some(it(i));
        }
        assert!(h.groups(4).is_empty());
    }

    #[test]
    fn memory_stays_bounded() {
        let mut g = SuccessorGraph::new(Popularity {
            j: 1,
            k: 2,
            max_nodes: 100,
        });
        let mut prev = None;
        for i in 0..10_000 {
            g.observe(prev, it(i));
            prev = Some(it(i));
            assert!(g.len() <= 100);
        }
        assert!(g.memory_bytes() < 100_000, "{}", g.memory_bytes());
    }

    proptest! {
        #[test]
        fn links_follow_the_reference(
            seq in proptest::collection::vec(0u64..12, 0..300),
            j in 1usize..4, extra in 0usize..4,
        ) {
            let k = j + extra;
            let mut g = SuccessorGraph::new(Popularity { j, k, max_nodes: 1 << 20 });
            let mut prev = None;
            for &x in &seq {
                g.observe(prev, it(x));
                prev = Some(it(x));
            }
            let want = reference_links(&seq, j, k);
            for x in 0..12u64 {
                let mut got: Vec<u64> = g.links(it(x)).iter().map(|i| i.index).collect();
                got.sort();
                let expected = want.get(&x).cloned().unwrap_or_default();
                prop_assert_eq!(got, expected);
            }
        }

        #[test]
        fn tarjan_matches_mutual_reachability(
            edges in proptest::collection::vec((0usize..15, 0usize..15), 0..40),
        ) {
            let n = 15;
            let mut succ = vec![Vec::new(); n];
            for (a, b) in edges {
                succ[a].push(b);
            }
            let comps = tarjan(&succ);
            let r = reaches(&succ);
            let mut comp_of = vec![usize::MAX; n];
            for (c, members) in comps.iter().enumerate() {
                for &m in members {
                    prop_assert_eq!(comp_of[m], usize::MAX, "node in two components");
                    comp_of[m] = c;
                }
            }
            for a in 0..n {
                for b in 0..n {
                    prop_assert_eq!(comp_of[a] == comp_of[b], r[a][b] && r[b][a]);
                }
            }
        }

        #[test]
        fn groups_partition_the_cyclic_items_within_the_segment_size(
            seq in proptest::collection::vec(0u64..30, 0..400),
            per in 1usize..8,
        ) {
            let mut g = SuccessorGraph::new(Popularity { j: 1, k: 3, max_nodes: 1 << 20 });
            let mut prev = None;
            for &x in &seq {
                g.observe(prev, it(x));
                prev = Some(it(x));
            }
            let groups = g.groups(per);
            let mut seen = std::collections::HashSet::new();
            for grp in &groups {
                prop_assert!(!grp.is_empty() && grp.len() <= per);
                for i in grp {
                    prop_assert!(seen.insert(*i), "item in two groups");
                }
            }
            // Exactly the items on a cycle (a component of ≥ 2 items) are grouped.
            let comps = g.components();
            let cyclic: std::collections::HashSet<Item> =
                comps.into_iter().filter(|c| c.len() >= 2).flatten().collect();
            prop_assert_eq!(seen, cyclic);
        }
    }
}
