//! [`NgramModel`]: a backoff n-gram model held like KenLM's probing model, scored exactly as
//! KenLM scores.
//!
//! Unigrams sit in an array indexed by word id; each higher order is an [`NgramTable`] keyed
//! by the n-gram's KenLM key ([`ngram_key`]). Scoring a word after a context walks the
//! context from the nearest word outwards, extending the key one word per order
//! ([`combine`]) and stopping at the first miss, then adds the backoffs of the context
//! lengths it did not match. This needs every suffix of a stored n-gram to be stored as well;
//! ARPA files need not have them (SRILM prunes such "suffixes"), so loading inserts the
//! missing ones as blanks whose probability is the one backing off gives, as KenLM does
//! (`search_hashed.cc`: `FindLower`, `AdjustLower`). A missing *context* (prefix) of an n-gram
//! is an error, as in KenLM.
//!
//! Scores are `f32` sums in KenLM's order of operations, so a sentence's log10 probability is
//! the one `kenlm.Model.score` gives, normally bit for bit.
//!
//! (Over 500 lines: the model's scoring and its ARPA builder (about 260 lines), which adds the
//! missing suffixes the scoring relies on, belong together; 46 lines are unit tests.)

use super::arpa::{self, ArpaVisitor};
use super::probing::{combine, has_extension, NgramTable, Vocab, Weights};
use crate::error::{Error, Result};
use std::path::Path;

/// Highest order this implementation holds (KenLM's default build allows 6).
pub const MAX_ORDER: usize = 12;

/// KenLM's log10 probability for `<unk>` when an ARPA file has none.
pub const UNKNOWN_MISSING_LOGPROB: f32 = -100.0;

/// The id of `<unk>`; every word the model does not know maps to it.
pub const UNK: u32 = 0;

/// What scoring remembers between words: the last words (nearest first) that can still be
/// part of a longer n-gram, and their backoffs (`backoff[i]` is that of the `i + 1` nearest
/// words). Plain data on the stack: scoring allocates nothing.
#[derive(Clone, Copy, Debug)]
pub struct State {
    words: [u32; MAX_ORDER - 1],
    backoff: [f32; MAX_ORDER - 1],
    length: usize,
}

impl State {
    const EMPTY: State = State {
        words: [0; MAX_ORDER - 1],
        backoff: [0.0; MAX_ORDER - 1],
        length: 0,
    };
}

#[derive(Clone, Debug)]
pub struct NgramModel {
    order: usize,
    vocab: Vocab,
    bos: u32,
    eos: u32,
    /// By word id; `unigrams[0]` is `<unk>`.
    unigrams: Vec<Weights>,
    /// Orders 2..order-1 (`middle[n - 2]` holds order `n`).
    middle: Vec<NgramTable>,
    /// The highest order.
    longest: NgramTable,
    /// The n-gram counts of the ARPA header (blanks not included).
    counts: Vec<u64>,
    saw_unk: bool,
}

impl NgramModel {
    /// Loads an ARPA file.
    pub fn load_arpa(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let reader = std::io::BufReader::with_capacity(1 << 20, file);
        Self::read_arpa(reader, &path.display().to_string())
    }

    /// Reads an ARPA file from any reader (`source` names it in errors).
    pub fn read_arpa(reader: impl std::io::BufRead, source: &str) -> Result<Self> {
        let mut builder = Builder {
            source: source.to_string(),
            model: None,
            ids: Vec::new(),
            keys: Vec::new(),
            between: Vec::new(),
            current_order: 0,
        };
        arpa::read(reader, source, &mut builder)?;
        builder.finish()
    }

    pub fn order(&self) -> usize {
        self.order
    }

    /// Words, `<unk>` included (whether or not the file lists it).
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The ARPA header's n-gram counts.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    pub fn bos(&self) -> u32 {
        self.bos
    }

    pub fn eos(&self) -> u32 {
        self.eos
    }

    /// The id of `word`, [`UNK`] when the model does not know it.
    #[inline]
    pub fn word_id(&self, word: &[u8]) -> u32 {
        self.vocab.get(word).unwrap_or(UNK)
    }

    pub fn word(&self, id: u32) -> &[u8] {
        self.vocab.word(id)
    }

    /// Bytes of memory the tables take.
    pub fn memory(&self) -> usize {
        self.vocab.memory()
            + self.unigrams.len() * 8
            + self.middle.iter().map(NgramTable::memory).sum::<usize>()
            + self.longest.memory()
    }

    /// KenLM's `BeginSentenceWrite`: the context `<s>`.
    pub fn begin_sentence(&self) -> State {
        let mut s = State::EMPTY;
        s.length = 1;
        s.words[0] = self.bos;
        s.backoff[0] = self.unigrams[self.bos as usize].backoff;
        s
    }

    /// KenLM's `NullContextWrite`: no context.
    pub fn null_context(&self) -> State {
        State::EMPTY
    }

    /// log10 P(`word` | `state`), and the state after it (KenLM's `FullScore`).
    #[inline]
    pub fn score(&self, state: &State, word: u32, out: &mut State) -> f32 {
        let (mut prob, ngram_length) = self.score_except_backoff(state, word, out);
        for &b in &state.backoff[ngram_length - 1..state.length.max(ngram_length - 1)] {
            prob += b;
        }
        prob
    }

    /// KenLM's `ScoreExceptBackoff`: the probability of the longest matching n-gram and its
    /// length; writes the next state.
    #[inline]
    fn score_except_backoff(&self, state: &State, word: u32, out: &mut State) -> (f32, usize) {
        let uni = &self.unigrams[word as usize];
        out.backoff[0] = uni.backoff;
        let mut prob = uni.prob();
        let mut independent_left = uni.independent_left();
        let mut ngram_length = 1;
        out.length = usize::from(uni.has_extension());
        out.words[0] = word;
        if state.length == 0 {
            return (prob, ngram_length);
        }
        let mut node = word as u64;
        let mut i = 0;
        loop {
            if i == state.length || independent_left {
                break;
            }
            if i == self.order - 2 {
                if let Some(w) = self.longest.get(combine(node, state.words[i])) {
                    prob = w.prob();
                    ngram_length = self.order;
                }
                break;
            }
            node = combine(node, state.words[i]);
            let Some(w) = self.middle[i].get(node) else {
                break;
            };
            out.backoff[i + 1] = w.backoff;
            prob = w.prob();
            independent_left = w.independent_left();
            ngram_length = i + 2;
            if has_extension(w.backoff) {
                out.length = ngram_length;
            }
            i += 1;
        }
        // KenLM's CopyRemainingHistory.
        if out.length > 1 {
            out.words[1..out.length].copy_from_slice(&state.words[..out.length - 1]);
        }
        (prob, ngram_length)
    }

    /// log10 P of `words` (ids) as one sentence: after `<s>` when `bos`, then `</s>` when
    /// `eos`; KenLM's `Model.score(sentence, bos, eos)`, summed in `f32` as KenLM sums.
    pub fn score_ids(&self, words: &[u32], bos: bool, eos: bool) -> f32 {
        self.score_sentence(words.iter().copied(), bos, eos).0
    }

    /// log10 P of a sentence of whitespace-separated words, as `kenlm.Model.score` splits it
    /// (on ASCII space, tab, newline, CR, VT, FF); returns it and the number of words.
    pub fn score_words(&self, sentence: &str, bos: bool, eos: bool) -> (f32, usize) {
        self.score_sentence(split_words(sentence).map(|w| self.word_id(w)), bos, eos)
    }

    /// The sentence's log10 P and its number of words (`</s>` not counted).
    fn score_sentence(
        &self,
        words: impl Iterator<Item = u32>,
        bos: bool,
        eos: bool,
    ) -> (f32, usize) {
        let mut state = if bos {
            self.begin_sentence()
        } else {
            self.null_context()
        };
        let mut next = State::EMPTY;
        let mut total = 0.0f32;
        let mut n = 0;
        for w in words {
            total += self.score(&state, w, &mut next);
            std::mem::swap(&mut state, &mut next);
            n += 1;
        }
        if eos {
            total += self.score(&state, self.eos, &mut next);
        }
        (total, n)
    }
}

/// KenLM's `kSpaces`: what `Model.score` splits a sentence on.
#[inline]
pub fn is_kenlm_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The words of a sentence as KenLM's `Model.score` cuts them.
pub fn split_words(s: &str) -> impl Iterator<Item = &[u8]> {
    s.as_bytes()
        .split(|&b| is_kenlm_space(b))
        .filter(|w| !w.is_empty())
}

/// Builds the model from the ARPA entries as they stream by.
struct Builder {
    source: String,
    model: Option<NgramModel>,
    // Scratch, reused for every entry.
    ids: Vec<u32>,
    keys: Vec<u64>,
    between: Vec<u64>,
    current_order: usize,
}

impl Builder {
    fn err(&self, message: String) -> Error {
        Error::format(&self.source, message)
    }

    fn unigram(&mut self, word: &str, prob: f32, backoff: Option<f32>) -> Result<()> {
        let model = self.model.as_mut().expect("counts come first");
        let id = if word == "<unk>" || word == "<UNK>" {
            model.saw_unk = true;
            UNK
        } else {
            let (id, new) = model.vocab.insert(word.as_bytes());
            if !new {
                return Err(Error::format(
                    &self.source,
                    format!("the unigram {word:?} is listed twice"),
                ));
            }
            id
        };
        // Zero backoffs start as -0.0 ("nobody's context") until a longer n-gram shows
        // otherwise; a missing backoff is zero.
        let backoff = match backoff {
            Some(b) if b != 0.0 => b,
            _ => -0.0,
        };
        if model.unigrams.len() <= id as usize {
            model.unigrams.resize(id as usize + 1, Weights::default());
        }
        model.unigrams[id as usize] = Weights { prob, backoff };
        Ok(())
    }

    /// One n-gram of order >= 2: KenLM's `ReadNGrams` body for the probing model.
    fn ngram(&mut self, words: &[&str], prob: f32, backoff: Option<f32>) -> Result<()> {
        let n = words.len();
        let model = self.model.as_mut().expect("counts come first");
        // ids in reverse: ids[0] is the last word.
        self.ids.clear();
        for w in words.iter().rev() {
            let id = match model.vocab.get(w.as_bytes()) {
                Some(id) => id,
                None if *w == "<unk>" || *w == "<UNK>" => UNK,
                None => {
                    return Err(Error::format(
                        &self.source,
                        format!(
                            "the word {w:?} of the {n}-gram {:?} is not among the unigrams",
                            words.join(" ")
                        ),
                    ))
                }
            };
            self.ids.push(id);
        }
        let ids = &self.ids;
        // keys[h] is the key of the (h + 2)-gram ending with the last word.
        self.keys.clear();
        let mut key = combine(ids[0] as u64, ids[1]);
        self.keys.push(key);
        for &id in &ids[2..] {
            key = combine(key, id);
            self.keys.push(key);
        }
        let backoff = match backoff {
            Some(b) if b != 0.0 => b,
            _ => -0.0,
        };
        let mut weights = Weights { prob, backoff };
        weights.set_independent_left();
        let table = if n == model.order {
            &mut model.longest
        } else {
            &mut model.middle[n - 2]
        };
        table.get_or_insert(self.keys[n - 2], weights);

        // FindLower: the longest stored suffix, inserting blanks for the missing ones.
        // `between` holds the keys (0 for the unigram) from the (n-1)-suffix down to it.
        self.between.clear();
        let mut basis_found = false;
        for lower in (0..n.saturating_sub(2)).rev() {
            let (_, inserted) = model.middle[lower].get_or_insert(
                self.keys[lower],
                Weights {
                    prob: 0.0,
                    backoff: -0.0,
                },
            );
            self.between.push(self.keys[lower]);
            if !inserted {
                basis_found = true;
                break;
            }
        }
        if !basis_found {
            self.between.push(0); // the unigram of the last word
        }
        // Order of the n-gram a table key in `between` belongs to: the keys run from order
        // n-1 down.
        let order_of = |i: usize| n - 1 - i;
        if self.between.len() > 1 {
            // AdjustLower: give the blanks the probability backing off gives.
            let basis_index = self.between.len() - 1;
            let mut basis = order_of(basis_index);
            let basis_weights = if basis == 1 {
                model.unigrams[ids[0] as usize]
            } else {
                *model.middle[basis - 2]
                    .get(self.between[basis_index])
                    .expect("just found")
            };
            let mut prob = basis_weights.prob();
            let mut change = basis_index - 1;
            if basis == 1 {
                // A bigram from the unigram backoff of the previous word and the unigram.
                let ctx = &mut model.unigrams[ids[1] as usize];
                ctx.set_extension();
                prob += ctx.backoff;
                model.middle[0]
                    .get_mut(self.between[change])
                    .expect("just inserted")
                    .prob = prob;
                basis = 2;
                change = change.wrapping_sub(1);
            }
            // Key of the basis-gram of context words ids[1..=basis].
            let mut backoff_key = ids[1] as u64;
            for &id in &ids[2..=basis] {
                backoff_key = combine(backoff_key, id);
            }
            while basis < n - 1 {
                if let Some(ctx) = model.middle[basis - 2].get_mut(backoff_key) {
                    ctx.set_extension();
                    prob += ctx.backoff;
                }
                model.middle[basis - 1]
                    .get_mut(self.between[change])
                    .expect("just inserted")
                    .prob = prob;
                backoff_key = combine(backoff_key, ids[basis + 1]);
                basis += 1;
                change = change.wrapping_sub(1);
            }
        }
        // MarkExtends: every suffix, blank or not, now has a longer n-gram ending with it.
        for (i, &key) in self.between.iter().enumerate() {
            let order = order_of(i);
            let w = if order == 1 {
                &mut model.unigrams[ids[0] as usize]
            } else {
                model.middle[order - 2].get_mut(key).expect("present")
            };
            w.mark_extends_left();
        }

        // Activate: the context (prefix) must exist, and now has an extension.
        let context = if n == 2 {
            Some(&mut model.unigrams[ids[1] as usize])
        } else {
            let mut key = ids[1] as u64;
            for &id in &ids[2..n] {
                key = combine(key, id);
            }
            model.middle[n - 3].get_mut(key)
        };
        match context {
            Some(w) => w.set_extension(),
            None => {
                return Err(Error::format(
                    &self.source,
                    format!(
                        "the context of the {n}-gram {:?} is not among the {}-grams",
                        words.join(" "),
                        n - 1
                    ),
                ))
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<NgramModel> {
        let source = self.source;
        let err = |message: &str| Error::format(&source, message);
        let Some(mut model) = self.model else {
            return Err(err("no n-grams"));
        };
        if !model.saw_unk {
            model.unigrams[UNK as usize] = Weights {
                prob: UNKNOWN_MISSING_LOGPROB,
                backoff: 0.0,
            };
        }
        let (Some(bos), Some(eos)) = (model.vocab.get(b"<s>"), model.vocab.get(b"</s>")) else {
            return Err(err("the model lacks <s> or </s> among its unigrams"));
        };
        model.bos = bos;
        model.eos = eos;
        Ok(model)
    }
}

impl ArpaVisitor for Builder {
    fn counts(&mut self, counts: &[u64]) -> Result<()> {
        let order = counts.len();
        if order < 2 {
            return Err(self.err("a model needs at least order 2 (KenLM's limit too)".into()));
        }
        if order > MAX_ORDER {
            return Err(self.err(format!("order {order} is above the supported {MAX_ORDER}")));
        }
        let mut vocab = Vocab::default();
        vocab.insert(b"<unk>"); // id 0, listed in the file or not
                                // Tables sized for the counts, plus room for blanks.
        let middle = counts[1..order - 1]
            .iter()
            .map(|&c| NgramTable::with_capacity(c as usize + c as usize / 8))
            .collect();
        self.model = Some(NgramModel {
            order,
            vocab,
            bos: 0,
            eos: 0,
            unigrams: Vec::with_capacity(counts[0] as usize + 1),
            middle,
            longest: NgramTable::with_capacity(counts[order - 1] as usize),
            counts: counts.to_vec(),
            saw_unk: false,
        });
        Ok(())
    }

    fn entry(&mut self, words: &[&str], prob: f32, backoff: Option<f32>) -> Result<()> {
        let n = words.len();
        if n != self.current_order {
            self.current_order = n;
            if n == 2 {
                // Every word is known now: size the unigram array (and <unk> in place).
                let model = self.model.as_mut().expect("counts come first");
                let len = model.vocab.len();
                model.unigrams.resize(len, Weights::default());
            }
        }
        if n == 1 {
            self.unigram(words[0], prob, backoff)
        } else {
            self.ngram(words, prob, backoff)
        }
    }
}

#[cfg(test)]
// -0.30103 and the like are log10 probabilities as ARPA files print them, not log10(2).
#[allow(clippy::approx_constant)]
mod tests {
    use super::*;

    // KenLM's lm/common/test_data/toy0.arpa.
    const TOY0: &str = "\\data\\\nngram 1=5\nngram 2=7\nngram 3=7\n\n\\1-grams:\n-0.90309\t<unk>\t0\n0\t<s>\t-0.30103\n-0.46943438\ta\t-0.30103\n-0.5720968\t</s>\t0\n-0.5720968\tb\t-0.30103\n\n\\2-grams:\n-0.37712017\t<s> a\t-0.30103\n-0.37712017\ta a\t-0.30103\n-0.2984526\tb a\t-0.30103\n-0.58682007\ta </s>\t0\n-0.5220179\tb </s>\t0\n-0.41574955\t<s> b\t-0.30103\n-0.58682007\ta b\t-0.30103\n\n\\3-grams:\n-0.14885087\t<s> a a\n-0.33741078\tb a a\n-0.124077894\t<s> b a\n-0.2997394\ta b a\n-0.42082912\tb a </s>\n-0.397617\ta b </s>\n-0.20102891\ta a b\n\n\\end\\\n";

    fn toy() -> NgramModel {
        NgramModel::read_arpa(TOY0.as_bytes(), "toy0.arpa").unwrap()
    }

    #[test]
    fn scores_follow_the_backoff_rule() {
        let m = toy();
        assert_eq!(m.order(), 3);
        // "a b": P(a|<s>) P(b|<s> a) P(</s>|a b); <s> a b is missing: bo(<s> a) + P(b|a).
        let want = -0.37712017f32 + (-0.30103 + -0.58682007) + -0.397617;
        assert!((m.score_words("a b", true, true).0 - want).abs() < 1e-6);
        // An unknown word: P(<unk>) after backing off from <s>; then </s> after <unk>.
        let want = (-0.30103f32 + -0.90309) + -0.5720968;
        assert!((m.score_words("zzz", true, true).0 - want).abs() < 1e-6);
        assert_eq!(
            m.score_words(" a \t b\n", true, true),
            m.score_words("a b", true, true)
        );
    }

    #[test]
    fn missing_suffixes_become_blanks_and_missing_contexts_fail() {
        // "x a b" with no "a b": KenLM backs off through "a" for the blank.
        let arpa = "\\data\\\nngram 1=5\nngram 2=3\nngram 3=1\n\n\\1-grams:\n-1\t<s>\t-0.5\n-1\t</s>\n-1\ta\t-0.25\n-1.5\tb\t-0.1\n-2\tx\t-0.2\n\n\\2-grams:\n-0.5\tx a\t-0.3\n-0.6\t<s> x\t-0.4\n-0.7\ta </s>\n\n\\3-grams:\n-0.1\tx a b\n\n\\end\\\n";
        let m = NgramModel::read_arpa(arpa.as_bytes(), "t").unwrap();
        let [x, a, b] = [b"x", b"a", b"b"].map(|w| m.word_id(w));
        let p = m.score_ids(&[x, a, b], false, false);
        // P(x) + P(a|x) + P(b|x a)
        assert!((p - (-2.0 + -0.5 + -0.1)).abs() < 1e-6, "{p}");
        // The blank "a b" scores as bo(a) + P(b).
        let p = m.score_ids(&[a, b], false, false);
        assert!((p - (-1.0 + -0.25 + -1.5)).abs() < 1e-6, "{p}");
        let bad = arpa.replace("-0.5\tx a\t-0.3\n", "-0.5\tb a\t-0.3\n");
        let e = NgramModel::read_arpa(bad.as_bytes(), "t").unwrap_err();
        assert!(e.to_string().contains("context"), "{e}");
    }
}
