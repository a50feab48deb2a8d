//! Prints the token ids (and their text) of each argument, or of each stdin line when no text is
//! given, using the tokenizer of a GGUF file: `cargo run -p ingot-tokenizer --example tokenize --
//! MODEL.gguf [TEXT...]`. BOS is added per the file's `add_bos_token`; special-token texts are
//! parsed.

use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;

use ingot_gguf::GgufFile;
use ingot_tokenizer::Tokenizer;

fn show(tok: &Tokenizer, text: &str) {
    let ids = tok.encode(text, true, true);
    let pieces: Vec<String> = ids
        .iter()
        .map(|&id| format!("{:?}", String::from_utf8_lossy(tok.token_bytes(id))))
        .collect();
    println!("{ids:?}\t{}", pieces.join(" "));
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: tokenize MODEL.gguf [TEXT...]");
        return ExitCode::from(2);
    };
    let tok = match GgufFile::open(Path::new(path))
        .map_err(|e| e.to_string())
        .and_then(|f| Tokenizer::from_gguf(f.header()).map_err(|e| e.to_string()))
    {
        Ok(tok) => tok,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.len() > 1 {
        args[1..].iter().for_each(|text| show(&tok, text));
    } else {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            show(&tok, &line);
        }
    }
    ExitCode::SUCCESS
}
