//! A small static file server for dist/ on 127.0.0.1 (loopback only), with the MIME types the
//! site needs (`application/wasm` for streaming compilation).

use std::path::{Component, Path};

pub fn serve(dist: &Path, port: u16) -> Result<(), String> {
    let addr = format!("127.0.0.1:{port}");
    let server =
        tiny_http::Server::http(&addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    eprintln!(
        "xtask: serving {} at http://{addr}/ (Ctrl-C stops)",
        dist.display()
    );
    for request in server.incoming_requests() {
        let path = request
            .url()
            .split(['?', '#'])
            .next()
            .unwrap_or("/")
            .to_owned();
        let response = match resolve(dist, &path) {
            Some(file) => match std::fs::read(&file) {
                Ok(bytes) => tiny_http::Response::from_data(bytes).with_header(content_type(&file)),
                Err(_) => not_found(),
            },
            None => not_found(),
        };
        // A client that hung up is not the server's problem.
        let _ = request.respond(response);
    }
    Ok(())
}

fn not_found() -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    tiny_http::Response::from_string("not found").with_status_code(404)
}

/// Maps a URL path to a file under `dist`, refusing anything that climbs out of it.
fn resolve(dist: &Path, url_path: &str) -> Option<std::path::PathBuf> {
    let relative = Path::new(url_path.trim_start_matches('/'));
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let file = dist.join(relative);
    let file = if file.is_dir() {
        file.join("index.html")
    } else {
        file
    };
    file.is_file().then_some(file)
}

fn content_type(file: &Path) -> tiny_http::Header {
    let mime = match file.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    };
    tiny_http::Header::from_bytes("Content-Type", mime).expect("the MIME literals above are ASCII")
}
