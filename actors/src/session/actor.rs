//! The actix wrapper of [`SessionState`]: one message type carrying a command and the
//! completion its reply goes to, so clients wait on it blocking or as a future.

use std::sync::Arc;

use actix::{Actor, ActorContext, Context, Handler, Message};
use graph::{GraphDef, Result};
use rendezvous::CompletionSender;

use crate::contain::contain_panic;

use super::state::{CompiledStep, SessionState, StepSignature};

/// A command to a session actor.
pub enum SessionCommand {
    /// Add nodes.
    Extend(GraphDef),
    /// Build (or find) a step.
    Prepare(StepSignature),
    /// Close the session and stop the actor.
    Close,
}

/// The reply to a [`SessionCommand`].
pub enum SessionReply {
    /// Reply to `Extend`.
    Extended(Result<()>),
    /// Reply to `Prepare`.
    Prepared(Result<Arc<CompiledStep>>),
    /// Reply to `Close`.
    Closed,
}

/// A command and where to reply.
pub struct SessionRequest {
    /// The command.
    pub command: SessionCommand,
    /// Receives the reply.
    pub reply: CompletionSender<SessionReply>,
}

impl Message for SessionRequest {
    type Result = ();
}

/// Hosts a [`SessionState`].
pub struct SessionActor {
    state: SessionState,
}

impl SessionActor {
    /// An actor over `state`.
    pub fn new(state: SessionState) -> SessionActor {
        SessionActor { state }
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;
}

impl Handler<SessionRequest> for SessionActor {
    type Result = ();

    fn handle(&mut self, req: SessionRequest, ctx: &mut Context<Self>) {
        let reply = match req.command {
            SessionCommand::Extend(gd) => {
                SessionReply::Extended(contain_panic("extending the graph", || {
                    self.state.extend(&gd)
                }))
            }
            SessionCommand::Prepare(sig) => {
                SessionReply::Prepared(contain_panic("compiling the step", || {
                    self.state.prepare(&sig)
                }))
            }
            SessionCommand::Close => {
                self.state.close();
                ctx.stop();
                SessionReply::Closed
            }
        };
        req.reply.complete(reply);
    }
}
