def greet(name: str) -> str:
    return f"hello, {name}, from the acme workspace"


if __name__ == "__main__":
    print(greet("world"))
