//! Serving a [`Router`] on a socket: connections with a header timeout, shutdown on SIGINT or
//! SIGTERM with a bounded grace, so that no client (a silent connection, a half-sent request, a
//! long stream) keeps the server or its shutdown waiting.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;

use crate::{load, ServeError, ServeOptions};

/// How long `serve_blocking` gives a connection to send its request headers (see
/// [`serve_connections`]).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long requests in flight may still finish after SIGINT or SIGTERM; connections still open
/// then are dropped, so no client (a half-sent request, a long stream) keeps the server alive.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Loads the model, binds `addr` and serves until Ctrl-C. Prints where it listens on stderr.
pub fn serve_blocking(opts: &ServeOptions, addr: SocketAddr) -> Result<(), ServeError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| ServeError::Io { what, source }
    };
    let service = load(opts)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(io("starting the runtime"))?;
    let result = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(io(&format!("binding {addr}")))?;
        let local = listener.local_addr().map_err(io("local address"))?;
        let (kind, description) = service.backend();
        let drafts = opts.draft.map_or(String::new(), |d| {
            let vocab = d
                .vocab
                .map_or(String::new(), |n| format!(" among the first {n} ids"));
            format!(", --draft mtp with {} draft(s) per step{vocab}", d.k)
        });
        eprintln!(
            "ingot serve: model {:?} on backend {kind} ({description}), ctx {}, queue {}{drafts}",
            service.model_id(),
            service.ctx(),
            opts.queue
        );
        eprintln!("listening on http://{local} (OpenAI API at http://{local}/v1)");
        serve_connections(
            listener,
            service.router(opts.max_body),
            DEFAULT_HEADER_TIMEOUT,
            shutdown_signal(),
        )
        .await;
        Ok(())
    });
    // Tasks still holding connections are dropped, not waited for.
    rt.shutdown_timeout(Duration::from_millis(100));
    result
}

/// Serves `router` on `listener` until `signal`, then stops accepting, lets the open connections
/// finish their requests for [`SHUTDOWN_GRACE`] and drops the ones still open. A connection must
/// send its request headers within `header_timeout` of being opened or of its previous response
/// (idle keep-alive included): a slow or silent client gets its connection closed rather than
/// holding it.
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    router: Router,
    header_timeout: Duration,
    signal: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut signal = std::pin::pin!(signal);
    loop {
        tokio::select! {
            () = &mut signal => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let tcp = match accepted {
                    Ok((tcp, _)) => tcp,
                    // Out of descriptors, or a connection reset before it was accepted: as
                    // axum::serve does, pause briefly rather than spin, and keep serving.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let service = TowerToHyperService::new(router.clone());
                let mut stop = stop_rx.clone();
                connections.spawn(async move {
                    // HTTP/1 only (the server's protocol): hyper-util's version-detecting builder
                    // waits for a first byte without any timeout, so a silent connection would
                    // never be closed.
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(header_timeout)
                        .serve_connection(TokioIo::new(tcp), service);
                    let mut conn = std::pin::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stop.changed() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        eprintln!(
            "ingot serve: {} connection(s) still open {} s after the signal: closing them",
            connections.len(),
            SHUTDOWN_GRACE.as_secs()
        );
        connections.abort_all();
    }
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = ctrl_c => {}
            () = term => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}
