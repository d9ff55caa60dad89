/// A reader that went away (`iosleuth … | head`) makes println! panic. The
/// panic unwinds, so every guard still restores what iosleuth changed; it
/// then ends quietly with 0, as a filter should.
fn broken_pipe(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    text.contains("Broken pipe")
}

fn main() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !broken_pipe(info.payload()) {
            default_hook(info);
        }
    }));
    let code = match std::panic::catch_unwind(iosleuth::cli::main) {
        Ok(code) => code,
        Err(p) if broken_pipe(p.as_ref()) => 0,
        Err(_) => 101,
    };
    std::process::exit(code);
}
