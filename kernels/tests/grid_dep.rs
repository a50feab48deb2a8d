//! The committed PTX rewritten for programmatic dependent launch (`ingot_kernels::grid_dep`): every
//! kernel gains exactly one `griddepcontrol.wait`, as its first instruction after its declarations.

use ingot_kernels::grid_dep::for_sm90;
use ingot_kernels::PTX;

#[test]
fn the_committed_kernels_each_wait_once_first() {
    let out = for_sm90(PTX).expect("the committed PTX rewrites");
    let entries = PTX.matches(".entry ").count();
    assert!(entries > 100, "{entries} entries");
    assert_eq!(out.matches("griddepcontrol.wait;").count(), entries);
    assert_eq!(
        out.matches("griddepcontrol.launch_dependents;").count(),
        entries
    );
    assert_eq!(out.matches(".target sm_90\n").count(), 1);
    assert!(!out.contains("sm_86"));
    for body in out.split(".entry ").skip(1) {
        let name = &body[..body.find('(').unwrap_or(0)];
        let open = body.find("\n{\n").expect("a body") + 3;
        let first = body[open..]
            .lines()
            .map(str::trim)
            .find(|l| {
                !(l.is_empty()
                    || l.starts_with("//")
                    || l.starts_with(".reg")
                    || l.starts_with(".shared")
                    || l.starts_with(".local"))
            })
            .expect("an instruction");
        assert_eq!(first, "griddepcontrol.wait;", "{name}");
    }
}
