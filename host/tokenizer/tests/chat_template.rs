//! (f) The DeepSeek-V2 chat template, against strings written out by hand from
//! docs/deepseek2-model.md#chat-template.

use ingot_tokenizer::{apply_chat_template_deepseek2, Role, DEEPSEEK2_BOS_TEXT};

#[test]
fn single_user_turn_with_generation_prompt() {
    let got = apply_chat_template_deepseek2(DEEPSEEK2_BOS_TEXT, None, &[(Role::User, "hi")], true);
    assert_eq!(got, "<｜begin▁of▁sentence｜>User: hi\n\nAssistant:");
}

#[test]
fn system_and_multi_turn_conversation() {
    let turns = [
        (Role::User, "What is 2+2?"),
        (Role::Assistant, "4"),
        (Role::User, "And 3+3?"),
    ];
    let got = apply_chat_template_deepseek2("<B>", Some("Be brief."), &turns, true);
    assert_eq!(
        got,
        "<B>Be brief.\n\nUser: What is 2+2?\n\nAssistant: 4<｜end▁of▁sentence｜>User: And 3+3?\n\nAssistant:"
    );
}

#[test]
fn no_generation_prompt_and_empty_bos() {
    let turns = [(Role::System, "sys"), (Role::User, "u")];
    assert_eq!(
        apply_chat_template_deepseek2("", None, &turns, false),
        "sys\n\nUser: u\n\n"
    );
    assert_eq!(apply_chat_template_deepseek2("", None, &[], false), "");
}
