"""The Textual dashboard and chat console. The only package in specterm that imports textual."""
