"""The sub-agents: each a prompt, the context it may see, and a strict parser of its answer."""
