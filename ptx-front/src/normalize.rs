//! Rewrites that let `ptx-syntax` 0.5 parse PTX as compilers write it.
//!
//! `red` is written by the ISA and by compilers as `red{.sem}{.scope}{.space}.op{.noftz}.type`
//! (`red.global.max.u64`), but `ptx-syntax` only accepts the operation first and the state space
//! second (`red.max.global.u64`). [`normalize_red`] permutes the dot-separated modifiers of every
//! `red` in place: every byte offset, and thus every line number and span, is unchanged, and
//! analyses that read mnemonics back from the original text still see the compiler's spelling.
//! Consumers that read modifiers from the tokens of the rewritten text (the simulator's lowering)
//! treat them as a set, so their order does not matter there either.

use std::borrow::Cow;

/// Operations `red` accepts.
const RED_OPS: [&str; 8] = ["add", "inc", "dec", "min", "max", "and", "or", "xor"];

/// `src` with the modifiers of every `red` instruction in the order `ptx-syntax` accepts (borrowed
/// when nothing changes).
pub fn normalize_red(src: &str) -> Cow<'_, str> {
    let bytes = src.as_bytes();
    let mut out: Option<String> = None;
    let mut from = 0;
    while let Some(start) = src[from..].find("red.").map(|i| i + from) {
        from = start + 4;
        // `red.` must begin a mnemonic, not end another identifier (`shred.x`, `%red.y`).
        let begins_word = start == 0 || {
            let prev = bytes[start - 1];
            !(prev.is_ascii_alphanumeric() || matches!(prev, b'_' | b'.' | b'%' | b'$'))
        };
        if !begins_word {
            continue;
        }
        let end = src[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':')))
            .map_or(src.len(), |e| start + e);
        let mods: Vec<&str> = src[start + 4..end].split('.').collect();
        let op = mods.iter().position(|m| RED_OPS.contains(m));
        let space = mods
            .iter()
            .position(|m| *m == "global" || m.starts_with("shared"));
        let (Some(op), Some(space)) = (op, space) else {
            continue;
        };
        if (op, space) == (0, 1) {
            continue;
        }
        let rest = mods
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != op && k != space)
            .map(|(_, m)| *m);
        let order: Vec<&str> = [mods[op], mods[space]].into_iter().chain(rest).collect();
        // Same modifiers, same separators: the rewrite has the length of the original.
        let text = format!("red.{}", order.join("."));
        out.get_or_insert_with(|| src.to_string())
            .replace_range(start..end, &text);
    }
    out.map_or(Cow::Borrowed(src), Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::normalize_red;

    #[test]
    fn reorders_compiler_red_forms_in_place() {
        let src = "red.global.max.u64 [%rd1], %rd2;\n red.relaxed.gpu.global.add.f32 [%rd3], %f1;";
        let out = normalize_red(src);
        assert_eq!(
            out,
            "red.max.global.u64 [%rd1], %rd2;\n red.add.global.relaxed.gpu.f32 [%rd3], %f1;"
        );
        assert_eq!(out.len(), src.len());
        // Guarded, after other text on the line, with a comment that mentions `red.` as a word
        // part.
        let src = "  red.global.add.u32 [%rd1], %r1;\n@%p1 red.relaxed.gpu.global.max.s32 [x], 1; // bred.x\n";
        assert_eq!(
            normalize_red(src),
            "  red.add.global.u32 [%rd1], %r1;\n@%p1 red.max.global.relaxed.gpu.s32 [x], 1; // bred.x\n"
        );
        assert_eq!(
            normalize_red("red.shared::cta.min.s32 [%r1], %r2;"),
            "red.min.shared::cta.s32 [%r1], %r2;"
        );
    }

    #[test]
    fn leaves_other_text_alone() {
        for src in [
            "red.add.global.u32 [%rd1], %r1;",
            "shred.global.add x;",
            "mov.u32 %red.global, 1;",
            "atom.global.add.u32 %r1, [a], 1;",
            "mov.u32 %red.x, 1; // bred.global.add",
            "red.",
            "",
        ] {
            assert!(
                matches!(normalize_red(src), std::borrow::Cow::Borrowed(_)),
                "{src}"
            );
        }
    }
}
