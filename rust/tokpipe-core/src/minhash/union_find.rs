//! Union-find over document positions, rooted at the smallest position of each set: the
//! root *is* the first document of its cluster, so keeping "the first" needs no extra pass,
//! and the result does not depend on the order in which unions happen.

pub struct UnionFind {
    parent: Vec<u32>,
}

impl UnionFind {
    pub fn new(n: usize) -> Self {
        assert!(n <= u32::MAX as usize, "at most 2^32 - 1 documents");
        UnionFind {
            parent: (0..n as u32).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.parent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// The parent of every position (a root is its own): the vector itself, for a caller that
    /// resolves the roots in place.
    pub fn into_parents(self) -> Vec<u32> {
        self.parent
    }

    /// The root of `x`'s set, halving the path on the way.
    pub fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grand = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grand;
            x = grand;
        }
        x
    }

    /// Joins the sets of `a` and `b`; the smaller root becomes the root. True if they were apart.
    pub fn union(&mut self, a: u32, b: u32) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.parent[hi as usize] = lo;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_the_smallest_member() {
        let mut uf = UnionFind::new(6);
        assert!(uf.union(4, 5));
        assert!(uf.union(5, 2));
        assert!(!uf.union(4, 2));
        uf.union(0, 1);
        assert_eq!(
            (0..6).map(|i| uf.find(i)).collect::<Vec<_>>(),
            [0, 0, 2, 3, 2, 2]
        );
    }
}
