//! Module-scope `.global` and `.const` variables (lookup tables, counters): their layout, their
//! initial bytes, and the global-memory slots they live in.
//!
//! Each variable gets its own 64 GiB slot above the slots of [`crate::Sim::alloc`] allocations (see
//! `memory.rs`), so accesses past its end fault like any out-of-bounds access. Slots are handed out
//! from a process-wide counter when a module is parsed, so a symbol's address is a constant known
//! at lowering (instructions carry it as an immediate) and two modules loaded in one [`crate::Sim`]
//! never share storage. The storage itself is created in a `Sim` on the first launch of one of the
//! module's kernels (or by [`crate::Sim::module_variable`]), initialised from the declaration's
//! initializer (zero elsewhere), and then persists across launches, as a CUDA module's globals do.
//! `.const` variables are stored the same way: `ld.const` and generic loads of their addresses
//! reach them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use ptx_syntax::r#type::{GlobalInitializer, InitializerValue, VariableDirective};
use ptx_syntax::{PtxToken, Span};

use crate::ir::Space;
use crate::slots::{SLOT_SHIFT, VAR_FIRST_SLOT, VAR_SLOTS};
use ptx_front::statement::literal_at;

/// Largest module variable accepted: one global-memory slot.
const MAX_VAR_BYTES: u64 = 1 << SLOT_SHIFT;

/// Next variable slot (before wrapping into the variable slot range) and next module identity.
static NEXT_VAR_SLOT: AtomicU64 = AtomicU64::new(0);
static NEXT_MODULE_ID: AtomicU64 = AtomicU64::new(1);

/// One module-scope variable with storage.
pub(crate) struct ModuleVar {
    pub name: String,
    pub slot: u64,
    /// Declared size in bytes.
    pub size: u64,
    /// Initial value of the first `init.len()` bytes; the rest start zero.
    pub init: Vec<u8>,
}

impl ModuleVar {
    /// The variable's address (offset 0 of its slot).
    pub(crate) fn address(&self) -> u64 {
        self.slot << SLOT_SHIFT
    }
}

/// The module-scope variables of one module, and why the others cannot be modelled.
pub(crate) struct ModuleVars {
    /// Identity of the module, to tell its storage from another module's in a `Sim` if slots wrap.
    pub module_id: u64,
    pub vars: Vec<ModuleVar>,
    /// Declared variables without storage (`.tex`, symbol-address initializers), with the reason.
    pub unsupported: HashMap<String, String>,
}

impl Default for ModuleVars {
    fn default() -> Self {
        ModuleVars {
            module_id: NEXT_MODULE_ID.fetch_add(1, Relaxed),
            vars: Vec::new(),
            unsupported: HashMap::new(),
        }
    }
}

impl ModuleVars {
    /// Declares one `.global` or `.const` variable. `Err` is malformed PTX (an initializer longer
    /// than the variable, a bad literal); forms the simulator does not model are recorded in
    /// `unsupported`.
    pub(crate) fn declare(
        &mut self,
        v: &VariableDirective,
        size: Option<u64>,
        toks: &[(PtxToken, Span)],
    ) -> Result<(), String> {
        let name = v.name.val.clone();
        let elem_ty = crate::types::scalar_type(&v.ty);
        let init = match (&v.initializer, elem_ty) {
            (None, _) => Ok(Vec::new()),
            (Some(_), None) => Err("an initializer of this element type".to_string()),
            (Some(i), Some(ty)) => initial_bytes(i, ty, toks)?,
        };
        let init = match init {
            Ok(b) => b,
            Err(what) => {
                self.unsupported.insert(
                    name,
                    format!("module variable `{}` uses {what}", v.name.val),
                );
                return Ok(());
            }
        };
        // `x[] = {...}` takes its size from the initializer.
        let size = size.unwrap_or(init.len() as u64);
        if size > MAX_VAR_BYTES {
            return Err(format!(
                "module variable `{name}` of {size} bytes exceeds {MAX_VAR_BYTES}"
            ));
        }
        if init.len() as u64 > size {
            return Err(format!(
                "initializer of `{name}` has {} bytes, the variable {size}",
                init.len()
            ));
        }
        // Every slot starts 64 GiB-aligned, which satisfies any `.align` (a `u32`).
        let slot = VAR_FIRST_SLOT + NEXT_VAR_SLOT.fetch_add(1, Relaxed) % VAR_SLOTS;
        self.vars.push(ModuleVar {
            name,
            slot,
            size,
            init,
        });
        Ok(())
    }

    /// State space and address of a variable symbol, `None` if `name` is not a module variable, or
    /// the reason it cannot be used.
    pub(crate) fn symbol(&self, name: &str) -> Option<Result<(Space, u64), String>> {
        if let Some(why) = self.unsupported.get(name) {
            return Some(Err(why.clone()));
        }
        self.vars
            .iter()
            .find(|v| v.name == name)
            .map(|v| Ok((Space::Global, v.address())))
    }
}

/// The initial bytes of a variable of element type `ty`: `Ok(Err(what))` for initializers the
/// simulator does not model, `Err` for malformed ones.
fn initial_bytes(
    init: &GlobalInitializer,
    ty: crate::ir::Ty,
    toks: &[(PtxToken, Span)],
) -> Result<Result<Vec<u8>, String>, String> {
    let mut values = Vec::new();
    flatten(init, &mut values);
    let elem = (ty.bits() / 8).max(1) as usize;
    let mut out = Vec::with_capacity(values.len() * elem);
    for v in values {
        match v {
            InitializerValue::NumericLiteral { value, .. } => {
                let lit = literal_at(toks, value.span.start)?;
                let bits = crate::types::lit_bits(&lit, ty);
                out.extend_from_slice(&bits.to_le_bytes()[..elem]);
            }
            InitializerValue::StringLiteral { value, .. } if elem == 1 => {
                out.extend_from_slice(value.as_bytes());
            }
            InitializerValue::StringLiteral { .. } => {
                return Ok(Err(
                    "a string initializer for elements wider than a byte".into()
                ))
            }
            InitializerValue::FunctionSymbol { name, .. } => {
                return Ok(Err(format!(
                    "the address of `{}` as an initializer",
                    name.val
                )))
            }
        }
    }
    Ok(Ok(out))
}

fn flatten<'a>(init: &'a GlobalInitializer, out: &mut Vec<&'a InitializerValue>) {
    match init {
        GlobalInitializer::Scalar { value, .. } => out.push(value),
        GlobalInitializer::Aggregate { values, .. } => {
            for v in values {
                flatten(v, out);
            }
        }
    }
}
