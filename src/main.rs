//! The `iosleuth` binary: runs the command and maps its outcome to the exit
//! code (src/error.rs). A reader that went away (`iosleuth … | head`) is a
//! broken pipe in the error chain: every guard has already restored what
//! iosleuth changed on the way up, and iosleuth ends quietly with 0.

fn main() {
    let code = match iosleuth::run() {
        Ok(status) => status.0,
        Err(e) => {
            if !e.is_quiet() {
                let msg = e.to_string();
                eprintln!("iosleuth: {}", iosleuth::escape_lines(&msg));
            }
            e.exit_code()
        }
    };
    std::process::exit(code);
}
