//! SASS listings (from `cuobjdump -sass` or `nvdisasm -c`) and their loops.
//!
//! A SASS loop is found from a backward branch: a `BRA` whose target address is lower than its
//! own. The loop spans the target up to the last backward branch to that target; its size is the
//! number of instructions in that address range. A branch to itself (`BRA` right after `EXIT`
//! that pads every function) is not a loop. Innermost SASS loops are those whose range holds no
//! other loop's range.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use crate::error::AuditError;
use crate::tools::{run_tool, Disassembler, Tool, TOOL_TIMEOUT};

/// One SASS instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SassInstr {
    /// Byte address within the function.
    pub address: u64,
    /// Mnemonic with modifiers, e.g. `IMAD.WIDE.U32`, `BRA`.
    pub opcode: String,
    /// Target address of a `BRA`.
    pub branch_target: Option<u64>,
}

/// A loop in SASS: instructions from `start` to `end` (the backward branch), inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SassLoop {
    pub start: u64,
    pub end: u64,
    pub insts: usize,
}

/// Disassembles `cubin` and returns each function's instructions.
pub fn disassemble(
    disassembler: &Disassembler,
    cubin: &Path,
    arch: &str,
) -> Result<BTreeMap<String, Vec<SassInstr>>, AuditError> {
    let (tool, command) = match disassembler {
        Disassembler::Cuobjdump(path) => {
            let mut c = Command::new(path);
            c.arg("-sass").arg(cubin);
            (Tool::Cuobjdump, c)
        }
        Disassembler::Nvdisasm(path) => {
            let mut c = Command::new(path);
            c.arg("-c").arg(cubin);
            (Tool::Nvdisasm, c)
        }
    };
    let output = run_tool(command, tool, arch, TOOL_TIMEOUT)?;
    parse_listing(&output.stdout).map_err(|message| AuditError::ToolOutput {
        tool: tool.name(),
        arch: arch.to_string(),
        message,
    })
}

/// Parses a cuobjdump (`Function : name`, hexadecimal branch targets) or nvdisasm
/// (`.text.name:`, label branch targets) listing.
pub fn parse_listing(text: &str) -> Result<BTreeMap<String, Vec<SassInstr>>, String> {
    let mut functions: BTreeMap<String, Vec<SassInstr>> = BTreeMap::new();
    let mut current: Option<String> = None;
    // nvdisasm labels: name -> address of the next instruction; branches resolved at the end.
    let mut labels: HashMap<String, u64> = HashMap::new();
    let mut pending_labels: Vec<String> = Vec::new();
    let mut label_branches: Vec<(String, usize, String)> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("Function : ") {
            current = Some(name.trim().to_string());
            functions.entry(name.trim().to_string()).or_default();
            continue;
        }
        if let Some(name) = trimmed
            .strip_prefix(".text.")
            .and_then(|r| r.strip_suffix(':'))
        {
            current = Some(name.to_string());
            functions.entry(name.to_string()).or_default();
            continue;
        }
        if trimmed.starts_with(".L") && trimmed.ends_with(':') {
            pending_labels.push(trimmed.trim_end_matches(':').to_string());
            continue;
        }
        let Some((address, body)) = instruction_line(trimmed) else {
            continue;
        };
        let name = current
            .as_ref()
            .ok_or_else(|| format!("instruction before any function header: {trimmed:?}"))?;
        let instrs = functions.entry(name.clone()).or_default();
        for label in pending_labels.drain(..) {
            labels.insert(label, address);
        }
        let mut words = body.split_whitespace();
        let mut opcode = words.next().unwrap_or("");
        if opcode.starts_with('@') {
            opcode = words.next().unwrap_or("");
        }
        let operands: Vec<&str> = words.collect();
        let mut branch_target = None;
        if opcode == "BRA" || opcode.starts_with("BRA.") {
            let last = operands.last().copied().unwrap_or("").trim_end_matches(';');
            if let Some(hex) = last.strip_prefix("0x") {
                let target = u64::from_str_radix(hex, 16)
                    .map_err(|_| format!("bad branch target in {trimmed:?}"))?;
                branch_target = Some(target);
            } else if let Some(label) = last.strip_prefix("`(").and_then(|l| l.strip_suffix(')')) {
                label_branches.push((name.clone(), instrs.len(), label.to_string()));
            } else {
                return Err(format!("unrecognised branch target in {trimmed:?}"));
            }
        }
        instrs.push(SassInstr {
            address,
            opcode: opcode.to_string(),
            branch_target,
        });
    }
    for (function, index, label) in label_branches {
        let target = *labels
            .get(&label)
            .ok_or_else(|| format!("branch to unknown label {label} in {function}"))?;
        if let Some(instr) = functions.get_mut(&function).and_then(|f| f.get_mut(index)) {
            instr.branch_target = Some(target);
        }
    }
    Ok(functions)
}

/// `/*0a40*/  @!P0 BRA 0x1b0 ;  /* 0x... */` → (0xa40, "@!P0 BRA 0x1b0"). Encoding-only lines
/// (`/* 0x000fca00078e00ff */`) are not instructions.
fn instruction_line(line: &str) -> Option<(u64, &str)> {
    let rest = line.strip_prefix("/*")?;
    let close = rest.find("*/")?;
    let address = u64::from_str_radix(rest[..close].trim(), 16).ok()?;
    let body = rest[close + 2..].trim_start();
    let body = body.trim_start_matches('{').trim_start();
    let end = body.find(';')?;
    let body = body[..end].trim();
    (!body.is_empty()).then_some((address, body))
}

/// Innermost loops of one function, ordered by start address.
pub fn innermost_loops(instrs: &[SassInstr]) -> Vec<SassLoop> {
    let mut end_by_start: BTreeMap<u64, u64> = BTreeMap::new();
    for instr in instrs {
        if let Some(target) = instr.branch_target.filter(|&t| t < instr.address) {
            let end = end_by_start.entry(target).or_insert(instr.address);
            *end = (*end).max(instr.address);
        }
    }
    let loops: Vec<(u64, u64)> = end_by_start.into_iter().collect();
    loops
        .iter()
        .filter(|&&(start, end)| {
            !loops
                .iter()
                .any(|&(s, e)| (s, e) != (start, end) && s >= start && e <= end)
        })
        .map(|&(start, end)| SassLoop {
            start,
            end,
            insts: instrs
                .iter()
                .filter(|i| (start..=end).contains(&i.address))
                .count(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUOBJDUMP: &str = "
\t\tFunction : clean_sum
\t.headerflags\t@\"EF_CUDA_SM86 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM86)\"
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;  /* 0x00000a00ff017624 */
                                                                             /* 0x000fca00078e00ff */
        /*0010*/               @P0 BRA 0x40 ;                               /* 0x000003b000000947 */
        /*0020*/                   FADD R3, R3, R4 ;                        /* 0x0000000403031221 */
        /*0030*/              @!P1 BRA 0x20 ;                               /* 0xfffffed000009947 */
        /*0040*/                   LDG.E R4, [R4.64] ;                      /* 0x0000000404041981 */
        /*0050*/                   FADD R3, R3, R4 ;                        /* 0x0000000404041981 */
        /*0060*/               @P2 BRA 0x40 ;                               /* 0x0000000404041981 */
        /*0070*/               @P3 BRA 0x0 ;                                /* 0x0000000404041981 */
        /*0080*/                   EXIT ;                                   /* 0x000000000000794d */
        /*0090*/                   BRA 0x90;                                /* 0xfffffff000007947 */
\t\t..........
";

    #[test]
    fn finds_innermost_backward_branch_loops() {
        let functions = parse_listing(CUOBJDUMP).unwrap();
        let f = &functions["clean_sum"];
        assert_eq!(f.len(), 10);
        assert_eq!(f[1].opcode, "BRA");
        assert_eq!(f[1].branch_target, Some(0x40));
        // 0x20..=0x30 and 0x40..=0x60 are innermost; 0x0..=0x70 encloses both; the trailing
        // self-branch at 0x90 is padding, not a loop.
        assert_eq!(
            innermost_loops(f),
            vec![
                SassLoop {
                    start: 0x20,
                    end: 0x30,
                    insts: 2
                },
                SassLoop {
                    start: 0x40,
                    end: 0x60,
                    insts: 3
                },
            ]
        );
    }

    #[test]
    fn nvdisasm_label_targets_resolve() {
        let text = ".text.k:\n        /*0000*/                   MOV R1, R2 ;\n.L_x_1:\n        /*0010*/                   FADD R3, R3, R4 ;\n        /*0020*/              @!P1 BRA `(.L_x_1) ;\n        /*0030*/                   EXIT ;\n";
        let functions = parse_listing(text).unwrap();
        let loops = innermost_loops(&functions["k"]);
        assert_eq!(
            loops,
            vec![SassLoop {
                start: 0x10,
                end: 0x20,
                insts: 2
            }]
        );
    }

    #[test]
    fn malformed_branch_target_is_an_error() {
        let text = "Function : k\n /*0000*/ BRA somewhere ;\n";
        assert!(parse_listing(text).is_err());
    }
}
