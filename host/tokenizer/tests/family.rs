//! The pre-tokenizers and chat templates of the rest of the deepseek2 family (Kimi-K2/Moonlight
//! `kimi-k2`, GLM-4.7 `glm4`) on synthetic vocabularies; splits derived by hand from llama.cpp's
//! rules (comment above each).

use ingot_tokenizer::{
    ChatRequest, ChatTemplate, ChatTemplateError, PreTokenizer, PreTokenizerKind, Role, Tokenizer,
    VocabParts, DEEPSEEK2_EOS_TEXT,
};

fn kimi(text: &str) -> Vec<&str> {
    PreTokenizer::new(PreTokenizerKind::KimiK2).split(text)
}

fn glm(text: &str) -> Vec<&str> {
    PreTokenizer::new(PreTokenizerKind::Glm4).split(text)
}

#[test]
fn gguf_names_select_the_family_pre_tokenizers() {
    assert_eq!(
        PreTokenizerKind::from_gguf_name("kimi-k2"),
        Some(PreTokenizerKind::KimiK2)
    );
    assert_eq!(
        PreTokenizerKind::from_gguf_name("glm4"),
        Some(PreTokenizerKind::Glm4)
    );
    assert_eq!(
        PreTokenizerKind::from_gguf_name("chatglm-bpe"),
        Some(PreTokenizerKind::Glm4)
    );
}

#[test]
fn kimi_k2_letters_han_digits() {
    // Han runs stand alone; a letter run takes upper and lower case together (llama.cpp's splitter,
    // not the tiktoken pattern); " 12345" -> " " (gap), "123", "45" (\p{N}{1,3}); the leading space
    // joins "world".
    assert_eq!(
        kimi("getUserName 中文abc world 12345"),
        vec![
            "getUserName",
            " ",
            "中文",
            "abc",
            " world",
            " ",
            "123",
            "45"
        ]
    );
    // A leading non-letter, non-digit character joins the letters right after it ("(iPhone"); " $"
    // is not followed by a letter at the space, so the punctuation rule takes " $" and leaves "x".
    assert_eq!(kimi("(iPhone $x"), vec!["(iPhone", " $", "x"]);
    // Japanese kana are letters but not Han: they join the letter run, the kanji do not.
    assert_eq!(kimi("日本ひらがな"), vec!["日本", "ひらがな"]);
}

#[test]
fn kimi_k2_contractions_punctuation_spaces() {
    // Contractions are case-insensitive and only after letters.
    assert_eq!(kimi("I'M don'T we'LL"), vec!["I'M", " don'T", " we'LL"]);
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*` takes " ..." with its newline; `\s*[\r\n]+` the blank line.
    assert_eq!(kimi("a ...\n\n  b"), vec!["a", " ...\n\n", " ", " b"]);
    // Two spaces before a letter: the run gives its last space to the word (\s+(?!\S)).
    assert_eq!(kimi("x  y  "), vec!["x", " ", " y", "  "]);
}

#[test]
fn glm4_splits_like_llama3() {
    // llama.cpp routes CHATGLM4's regex to the llama3 splitter: digits in threes, contractions
    // apart.
    assert_eq!(
        glm("It's 12345 ok!!\n"),
        vec!["It", "'s", " ", "123", "45", " ok", "!!\n"]
    );
    assert_eq!(glm("hello  world"), vec!["hello", " ", " world"]);
}

/// ids: 0..4 "h" "i" "Ġ" "hi" "Ġhi"; 5 <bos>; 6 <eos> (control tokens).
fn parts(pre: &'static str, merges: Vec<&'static str>) -> VocabParts<'static> {
    VocabParts {
        tokens: vec!["h", "i", "Ġ", "hi", "Ġhi", "<bos>", "<eos>"],
        merges,
        token_types: Some(vec![1, 1, 1, 1, 1, 3, 3]),
        model: "gpt2",
        pre: Some(pre),
        bos: Some(5),
        eos: Some(6),
        add_bos: None,
        add_eos: None,
    }
}

#[test]
fn kimi_k2_without_merges_keeps_characters() {
    // No merges (as some Kimi-K2 files ship): BPE merges nothing, every character is its own token.
    let t = Tokenizer::from_parts(parts("kimi-k2", vec![])).unwrap();
    assert_eq!(t.encode("hi hi", false, false), vec![0, 1, 2, 0, 1]);
    let t = Tokenizer::from_parts(parts("kimi-k2", vec!["h i", "Ġ hi"])).unwrap();
    assert_eq!(t.encode("hi hi", false, false), vec![3, 4]);
}

#[test]
fn glm4_adds_no_bos_unless_asked() {
    // llama.cpp's CHATGLM4 adds no BOS by default; a file's add_bos_token still decides.
    let t = Tokenizer::from_parts(parts("glm4", vec!["h i", "Ġ hi"])).unwrap();
    assert_eq!(t.encode("hi hi", true, false), vec![3, 4]);
    let asked = VocabParts {
        add_bos: Some(true),
        ..parts("glm4", vec!["h i", "Ġ hi"])
    };
    assert_eq!(
        Tokenizer::from_parts(asked)
            .unwrap()
            .encode("hi", true, false),
        vec![5, 3]
    );
}

const TURNS: [(Role, &str); 3] = [
    (Role::User, "Hi"),
    (Role::Assistant, "Hello!"),
    (Role::User, "2+2?"),
];

fn request(add_generation_prompt: bool) -> ChatRequest<'static> {
    ChatRequest {
        bos: "<B>",
        eos: "<E>",
        system: Some("Be brief."),
        turns: &TURNS,
        add_generation_prompt,
    }
}

/// A GLM-4-style template (`[gMASK]<sop>`, `<|role|>` headers), written for this test in HF's Jinja
/// dialect with the Python string methods real templates call.
const GLM_STYLE: &str = "[gMASK]<sop>
{%- for m in messages -%}
<|{{ m.role }}|>
{{ m.content.strip() }}
{%- endfor -%}
{%- if add_generation_prompt %}<|assistant|>{% endif %}";

#[test]
fn jinja_template_renders_the_conversation() {
    let t = ChatTemplate::jinja(GLM_STYLE);
    assert_eq!(
        t.try_render(&request(true)).unwrap(),
        "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\nHello!<|user|>\n2+2?<|assistant|>"
    );
    assert_eq!(
        t.render(&request(false)),
        "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\nHello!<|user|>\n2+2?"
    );
}

#[test]
fn jinja_template_sees_special_tokens_and_loop_state() {
    // DeepSeek-V3's shape: bos_token first, a namespace flag, eos_token after assistant turns,
    // loop.last.
    let src = "{{ bos_token }}{% set ns = namespace(sys='') %}\
{%- for m in messages %}{% if m.role == 'system' %}{% set ns.sys = m.content %}{% endif %}{% endfor -%}
{{ ns.sys }}
{%- for m in messages if m.role != 'system' -%}
{%- if m.role == 'user' %}<U>{{ m.content }}{% else %}<A>{{ m.content }}{{ eos_token }}{% endif -%}
{%- if loop.last and add_generation_prompt %}<A>{% endif -%}
{%- endfor %}";
    assert_eq!(
        ChatTemplate::jinja(src).try_render(&request(true)).unwrap(),
        "<B>Be brief.<U>Hi<A>Hello!<E><U>2+2?<A>"
    );
}

#[test]
fn failing_or_absent_templates_fall_back_to_the_builtin_format() {
    let builtin = "<B>Be brief.\n\nUser: Hi\n\nAssistant: Hello!".to_owned()
        + DEEPSEEK2_EOS_TEXT
        + "User: 2+2?\n\nAssistant:";
    // raise_exception, a syntax error and an undefined function: a typed error, and the built-in
    // text.
    for src in [
        "{{ raise_exception('only user/assistant roles are supported') }}",
        "{% for m in messages %}",
        "{{ no_such_function() }}",
    ] {
        let t = ChatTemplate::jinja(src);
        assert!(
            matches!(
                t.try_render(&request(true)),
                Err(ChatTemplateError::Render(_))
            ),
            "{src}"
        );
        assert_eq!(t.render(&request(true)), builtin, "{src}");
    }
    let err = ChatTemplate::jinja("{{ raise_exception('no tools') }}")
        .try_render(&request(true))
        .unwrap_err();
    assert!(err.to_string().contains("no tools"), "{err}");
    assert_eq!(
        ChatTemplate::builtin().try_render(&request(true)),
        Err(ChatTemplateError::Absent)
    );
    assert_eq!(ChatTemplate::builtin().render(&request(true)), builtin);
}
