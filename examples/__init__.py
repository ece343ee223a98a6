"""The demo's example repository and pull request, shipped in the wheel as bot.examples."""
