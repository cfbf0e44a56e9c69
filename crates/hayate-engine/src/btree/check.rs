//! Whole-tree walks: structural check, page listing and destruction.
//!
//! `check` and `page_ids` expect no concurrent writers (a check of a changing tree may report
//! false corruption). They latch one page at a time.

use std::collections::HashSet;

use crate::buffer::BufferPool;
use crate::error::Result;
use crate::page::{PageId, PAGE_ID_NONE};

use super::node::{corruption, LeafValue, NodeAccessor, NodeLimits};
use super::overflow::{chain_page_ids, free_chain, VALUE_LENGTH_MAX};
use super::tree::{check_level, BTree};

/// What `BTree::check` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeCheckReport {
    /// Levels from the root to the leaves (1 for a lone root leaf).
    pub depth: usize,
    /// Leaf nodes.
    pub leaf_pages: u64,
    /// Inner nodes, the root included when it is not a leaf.
    pub inner_pages: u64,
    /// Pages of the overflow chains of values too large for a leaf.
    pub overflow_pages: u64,
    /// Key-value entries in the leaves.
    pub entries: u64,
    /// Bytes of the leaves' cells and slots (what the leaves hold, their headers aside).
    pub leaf_used_bytes: u64,
    /// Bytes the leaves could hold: their count times a node's usable bytes.
    pub leaf_capacity_bytes: u64,
}

impl TreeCheckReport {
    /// How full the leaves are, from 0 to 1 (1 for a tree without leaves).
    pub fn leaf_fill(&self) -> f64 {
        if self.leaf_capacity_bytes == 0 {
            1.0
        } else {
            self.leaf_used_bytes as f64 / self.leaf_capacity_bytes as f64
        }
    }
}

#[derive(Default)]
struct Walk {
    report: TreeCheckReport,
    page_ids: Vec<PageId>,
    visited: HashSet<PageId>,
    /// (leaf page id, right sibling link) in key order.
    leaves: Vec<(PageId, PageId)>,
}

/// Key range a subtree must respect: low inclusive, high exclusive.
struct Fences<'a> {
    low: Option<&'a [u8]>,
    high: Option<&'a [u8]>,
}

impl BTree {
    /// Verifies the whole tree; see `TreeCheckReport`. Errors name the page at fault.
    pub fn check(&self, pool: &BufferPool) -> Result<TreeCheckReport> {
        let walk = self.walk(pool)?;
        let leaves = &walk.leaves;
        for (index, (page_id, link)) in leaves.iter().enumerate() {
            let expected = leaves.get(index + 1).map_or(PAGE_ID_NONE, |next| next.0);
            if *link != expected {
                return Err(corruption(
                    *page_id,
                    format!("right sibling link {link} but the next leaf is {expected}"),
                ));
            }
        }
        Ok(walk.report)
    }

    /// Every page of the tree: nodes and overflow pages.
    pub fn page_ids(&self, pool: &BufferPool) -> Result<Vec<PageId>> {
        Ok(self.walk(pool)?.page_ids)
    }

    fn walk(&self, pool: &BufferPool) -> Result<Walk> {
        let mut walk = Walk::default();
        let fences = Fences {
            low: None,
            high: None,
        };
        walk_node(pool, self.root, None, &fences, &mut walk)?;
        Ok(walk)
    }

    /// Frees every page of the tree.
    pub fn destroy(self, pool: &BufferPool) -> Result<()> {
        let _operation = pool.operation();
        let mut stack = vec![self.root];
        while let Some(page_id) = stack.pop() {
            let guard = pool.write(page_id)?;
            let node = NodeAccessor::new(&guard)?;
            let mut chains = Vec::new();
            if node.is_leaf() {
                for index in 0..node.count() {
                    if let Some(chain) = node.leaf_value(index)?.chain() {
                        chains.push(chain);
                    }
                }
            } else {
                for index in 0..=node.count() {
                    stack.push(node.child(index)?);
                }
            }
            pool.free(guard);
            for (first_page_id, length_bytes) in chains {
                free_chain(pool, first_page_id, length_bytes)?;
            }
        }
        Ok(())
    }
}

/// Checks one node and recurses into its children; one latch at a time.
fn walk_node(
    pool: &BufferPool,
    page_id: PageId,
    expected_level: Option<u8>,
    fences: &Fences<'_>,
    walk: &mut Walk,
) -> Result<()> {
    if !walk.visited.insert(page_id) {
        return Err(corruption(page_id, "page reached twice in the tree"));
    }
    walk.page_ids.push(page_id);
    let limits = NodeLimits::new(pool.page_size());
    let guard = pool.read(page_id)?;
    let node = NodeAccessor::new(&guard)?;
    if node.page_id() != page_id {
        return Err(corruption(page_id, "node holds another page id"));
    }
    check_level(&node, expected_level)?;
    if expected_level.is_none() {
        walk.report.depth = node.level() as usize + 1;
    }
    node.check_space()?;
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(node.count());
    for index in 0..node.count() {
        let key = node.key(index)?;
        let ordered = keys.last().is_none_or(|previous| previous.as_slice() < key);
        let inside =
            fences.low.is_none_or(|low| low <= key) && fences.high.is_none_or(|high| key < high);
        if !ordered || !inside || key.len() > limits.key_length_max {
            return Err(corruption(
                page_id,
                format!("key {index} out of order or range"),
            ));
        }
        keys.push(key.to_vec());
    }
    if node.is_leaf() {
        walk.report.leaf_pages += 1;
        walk.report.entries += node.count() as u64;
        walk.report.leaf_used_bytes += node.used_bytes() as u64;
        walk.report.leaf_capacity_bytes += limits.usable_bytes as u64;
        walk.leaves.push((page_id, node.link()));
        let mut chains = Vec::new();
        for index in 0..node.count() {
            match node.leaf_value(index)? {
                LeafValue::Inline(value) if value.len() > limits.inline_value_max => {
                    return Err(corruption(
                        page_id,
                        format!("inline value {index} too long"),
                    ));
                }
                overflow @ LeafValue::Overflow {
                    length_bytes, head, ..
                } => {
                    let length = length_bytes as usize;
                    if length <= limits.inline_value_max
                        || length > VALUE_LENGTH_MAX
                        || head.len() > limits.inline_value_max
                    {
                        let detail = format!(
                            "overflow value {index} of {length} bytes, {} inline",
                            head.len()
                        );
                        return Err(corruption(page_id, detail));
                    }
                    chains.push(overflow.chain().expect("overflow"));
                }
                LeafValue::Inline(_) => {}
            }
        }
        drop(guard);
        for (first_page_id, length_bytes) in chains {
            let start = walk.page_ids.len();
            chain_page_ids(pool, first_page_id, length_bytes, &mut walk.page_ids)?;
            walk.report.overflow_pages += (walk.page_ids.len() - start) as u64;
            for &chain_page_id in &walk.page_ids[start..] {
                if !walk.visited.insert(chain_page_id) {
                    return Err(corruption(chain_page_id, "overflow page reached twice"));
                }
            }
        }
        return Ok(());
    }
    walk.report.inner_pages += 1;
    let children = (0..=node.count())
        .map(|index| node.child(index))
        .collect::<Result<Vec<PageId>>>()?;
    let child_level = node.level() - 1;
    drop(guard);
    for (index, child) in children.into_iter().enumerate() {
        let child_fences = Fences {
            low: if index == 0 {
                fences.low
            } else {
                Some(&keys[index - 1])
            },
            high: keys.get(index).map(Vec::as_slice).or(fences.high),
        };
        walk_node(pool, child, Some(child_level), &child_fences, walk)?;
    }
    Ok(())
}
