# The two quick-start commands (README): both install what they need first, and are idempotent.
.PHONY: chat test install

chat:
	@scripts/install.sh
	.venv/bin/specterm chat

test:
	@scripts/install.sh --test
	@scripts/install_chromium.sh
	.venv/bin/python -m pytest -q

install:
	@scripts/install.sh
