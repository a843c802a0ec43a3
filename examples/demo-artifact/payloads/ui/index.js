// prebuilt payload
