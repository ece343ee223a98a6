"""The demo's example repository and pull request, shipped in the wheel as alignbot.bot.examples."""
