// Passes the pgmq crate version actually resolved (from Cargo.lock) to
// main.rs as PGMQ_VERSION, for `describe`.
fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = std::fs::read_to_string("Cargo.lock").expect("Cargo.lock");
    let version = lock
        .split("[[package]]")
        .find(|p| p.contains("\nname = \"pgmq\"\n"))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .map(|v| v.trim_end_matches('"').to_owned())
        .expect("pgmq in Cargo.lock");
    println!("cargo:rustc-env=PGMQ_VERSION={version}");
}
