// The migrations are embedded by `sqlx::migrate!`, which sees a changed file
// but not a new one: the crate is built again when the folders change.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
