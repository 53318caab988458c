from .cli import entry

if __name__ == "__main__":  # the terminal UI's worker process imports this module again: do nothing then
    entry()
