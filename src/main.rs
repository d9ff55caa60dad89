fn main() {
    std::process::exit(iosleuth::cli::main());
}
