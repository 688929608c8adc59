"""Views: render a Report (text, widgets, HTML); they never compute figures."""
